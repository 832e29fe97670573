"""The brain service: consumes inputs for its partitions and runs one actor per session.

`Brain` routes each record: malformed ones to the dead-letter topic, ones on the wrong
partition (a producer with another partitioner) re-routed to the right one — inside a
transaction with the offset, so never sequenced twice — and the rest to their session's
actor, waking it if this brain does not hold it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from datetime import datetime, timezone
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.structs import ConsumerRecord, TopicPartition

from wakeline import topics
from wakeline.codec import MalformedRecord, decode, dead_letter_for, encode
from wakeline.commands import ToolResultReport, parse_command
from wakeline.events import RejectionCode
from wakeline.offsets import OffsetTracker
from wakeline_brain.actor import ActorDeps, MalformedInput, SessionActor
from wakeline_brain.settings import BrainSettings
from wakeline_brain.writer import PartitionWriter, Record, WriterClosed

log = logging.getLogger(__name__)
INPUT_TOPICS = (topics.INBOX, topics.TOOL_RESULTS)


class Brain(ConsumerRebalanceListener):
    def __init__(self, settings: BrainSettings, load, model_for, tools: list[dict[str, Any]]):
        self.settings = settings
        self.consumer: AIOKafkaConsumer | None = None  # set by `attach`; seeks after a (re)acquire
        self.writers: dict[int, PartitionWriter] = {}  # live partitions only
        self.tracker = OffsetTracker()  # keyed by TopicPartition of the input topics
        self.actors: dict[str, tuple[SessionActor, asyncio.Task]] = {}
        self._owned: set[int] = set()  # assigned by the group, live or still being acquired
        self._acquiring: dict[int, asyncio.Task] = {}
        self._deps = ActorDeps(
            host=settings.host, idle_evict_s=settings.idle_evict_s, load=load, model_for=model_for,
            tools=tools, release=self._release, dead_letter=self._dead_letter_input,
            now=lambda: datetime.now(timezone.utc), new_id=lambda: str(uuid.uuid4()),
            max_record_bytes=settings.max_record_bytes)

    def attach(self, consumer: AIOKafkaConsumer) -> None:
        self.consumer = consumer

    # -- partitions ------------------------------------------------------------------
    # A partition is live once its writer has fenced the previous owner and the
    # consumer has been put back to the committed offsets, which are final only after
    # that fence. Until then its records are dropped: the seek reads them again. A
    # writer that dies (broker restart, leader change, fence) takes the partition down
    # the same way and it is acquired again: weather, not an exit.
    #
    # The group's protocol is eager (aiokafka has no cooperative one): every rebalance
    # revokes everything. Revocation is therefore not acted on; the assignment that
    # follows says what really moved. A partition we keep keeps its writer, actors and
    # position, so a brain joining or dying elsewhere does not pause our sessions. One
    # that moved is safe to write to until its new owner's writer fences ours.
    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        pass

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        now = {tp.partition for tp in assigned}
        gone, self._owned = self._owned - now, now
        await self.release_partitions(gone)
        for partition in sorted(now):
            if partition in self.writers:
                self._resume_where_we_were(partition)
            else:
                self._start_acquiring(partition)

    def _resume_where_we_were(self, partition: int) -> None:
        # The consumer reset the position to the committed offset, which lags what our
        # actors already hold: reading those records again would only be deduplicated.
        assert self.consumer is not None
        for tp in (TopicPartition(t, partition) for t in INPUT_TOPICS):
            offset = self.tracker.next_offset(tp)
            if offset is not None:
                self.consumer.seek(tp, offset)

    def _start_acquiring(self, partition: int) -> None:
        if partition not in self._acquiring:
            self._acquiring[partition] = asyncio.create_task(self._acquire(partition), name=f"acquire-p{partition}")

    async def _acquire(self, partition: int) -> None:
        delay = 0.2
        try:
            while partition in self._owned:
                writer = self._new_writer(partition)
                try:
                    await writer.start()
                    positions = await self._committed_positions(partition)
                except Exception as err:  # the broker is restarting, or the group is moving
                    await writer.close()
                    log.warning("cannot take partition %s yet: %r; retrying in %.1f s", partition, err, delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                if partition not in self._owned or self.consumer is None:
                    await writer.close()
                    return
                for tp, offset in positions.items():  # no await from here on: nothing slips in
                    self.consumer.seek(tp, offset)
                self.writers[partition] = writer
                log.info("brain %s owns partitions %s", self.settings.host, sorted(self.writers))
                return
        finally:
            if self._acquiring.get(partition) is asyncio.current_task():
                del self._acquiring[partition]

    def _new_writer(self, partition: int) -> PartitionWriter:
        inputs = [TopicPartition(t, partition) for t in INPUT_TOPICS]
        return PartitionWriter(self.settings, partition, self.settings.group_id, self.tracker, inputs,
                               on_lost=self._writer_lost)

    async def _committed_positions(self, partition: int) -> dict[TopicPartition, int]:
        assert self.consumer is not None
        positions = {}
        for tp in (TopicPartition(t, partition) for t in INPUT_TOPICS):
            committed = await self.consumer.committed(tp)
            positions[tp] = committed if committed is not None else (await self.consumer.beginning_offsets([tp]))[tp]
        return positions

    def _writer_lost(self, writer: PartitionWriter, err: BaseException) -> None:
        if self.writers.get(writer.partition) is writer:
            asyncio.create_task(self._reacquire(writer.partition))

    async def _reacquire(self, partition: int) -> None:
        await self.release_partitions({partition})
        if partition in self._owned:
            log.warning("partition %s: writer lost; acquiring it again", partition)
            self._start_acquiring(partition)

    async def release_partitions(self, partitions: set[int]) -> None:
        for partition in partitions:
            task = self._acquiring.pop(partition, None)
            if task:
                task.cancel()
        doomed = [(a, t) for a, t in self.actors.values() if a.partition in partitions]
        for _, task in doomed:
            task.cancel()
        await asyncio.gather(*(t for _, t in doomed), return_exceptions=True)
        for partition in partitions & set(self.writers):
            await self.writers.pop(partition).close()
            self.tracker.drop([TopicPartition(topic, partition) for topic in INPUT_TOPICS])

    # -- records ---------------------------------------------------------------------
    def dispatch(self, record: ConsumerRecord) -> None:
        tp = TopicPartition(record.topic, record.partition)
        writer = self.writers.get(record.partition)
        if writer is None:
            return  # not live (yet): being acquired reads it again, the next owner otherwise
        self.tracker.add(tp, record.offset)
        token = (tp, record.offset)
        try:
            item = decode(record.value, ToolResultReport.model_validate_json
                          if record.topic == topics.TOOL_RESULTS else parse_command)
        except MalformedRecord as bad:
            self._malformed(record, writer, token, bad.reason)
            return
        right = topics.partition_for(item.session_id, self.settings.partitions)
        if right != record.partition:
            if len(record.value or b"") > self.settings.max_record_bytes:
                # Re-producing it would fail the partition's transaction on every retry.
                self._malformed(record, writer, token, f"{len(record.value)} bytes on the wrong partition; the"
                                f" limit is {self.settings.max_record_bytes} (max_record_bytes)", "too_large")
                return
            self._side_write(writer, [Record(record.topic, topics.record_key(item.session_id), record.value, right)],
                             token)
            return
        self._actor_for(item.session_id, item.tenant, record.partition, writer).mailbox.put_nowait((item, token))

    def _malformed(self, record: ConsumerRecord, writer: PartitionWriter, token: Any, reason: str,
                   code: RejectionCode = "malformed") -> None:
        letter = dead_letter_for(record.topic, record.partition, record.offset, record.key, record.value,
                                 f"{code}: {reason}", "brain")
        known = _session_hint(record.value)
        self._side_write(writer, [Record(topics.DEAD_LETTER, record.key or b"", encode(letter))], None)
        if known and known[0] in self.actors:  # an input_rejected event where the session is known
            command_id = known[2] or f"malformed:{record.topic}:{record.partition}:{record.offset}"
            self.actors[known[0]][0].mailbox.put_nowait((MalformedInput(command_id, reason, code), token))
        else:
            self._release([token])

    def _side_write(self, writer: PartitionWriter, records: list[Record], token: Any) -> None:
        async def write() -> None:
            try:
                await writer.append(records)
            except WriterClosed:
                return  # not released: the record is read again once the partition is back
            if token is not None:
                self._release([token])
        asyncio.create_task(write())

    async def _dead_letter_input(self, item: Any, reason: str) -> None:
        partition = topics.partition_for(item.session_id, self.settings.partitions)
        letter = dead_letter_for(topics.INBOX, partition, -1, topics.record_key(item.session_id),
                                 item.model_dump_json().encode(), reason, "brain")
        writer = self.writers.get(partition)
        if writer is None:
            raise WriterClosed(f"partition {partition} is not live")
        await writer.append([Record(topics.DEAD_LETTER, topics.record_key(item.session_id), encode(letter))])

    def _release(self, tokens: list[Any]) -> None:
        for tp, offset in tokens:
            self.tracker.finish(tp, offset)

    def _actor_for(self, session_id: str, tenant: str, partition: int, writer: PartitionWriter) -> SessionActor:
        if session_id in self.actors:
            return self.actors[session_id][0]
        actor = SessionActor(session_id=session_id, tenant=tenant, partition=partition, writer=writer,
                             deps=self._deps)
        task = asyncio.create_task(self._run_actor(actor), name=f"session-{session_id}")
        self.actors[session_id] = (actor, task)
        return actor

    async def _run_actor(self, actor: SessionActor) -> None:
        try:
            await actor.run("an input arrived for a session this brain did not hold")
        except (asyncio.CancelledError, WriterClosed):
            pass  # the partition went away; its next owner (maybe us again) reads the inputs
        except Exception:
            # Inputs were dead-lettered as they failed (actor._park); what the actor held
            # is in the log. Only this session's actor stops.
            log.exception("session %s: its actor failed; dropping it", actor.session_id)
            self._release(actor.held_tokens())
        finally:
            self.actors.pop(actor.session_id, None)
            self._requeue_leftovers(actor)

    def _requeue_leftovers(self, actor: SessionActor) -> None:
        """An evicted actor may have been handed an input as it left: give it to a new one."""
        while not actor.mailbox.empty():
            item = actor.mailbox.get_nowait()
            if isinstance(item, tuple) and actor.partition in self.writers:
                payload, token = item
                self._actor_for(actor.session_id, actor.tenant, actor.partition,
                                self.writers[actor.partition]).mailbox.put_nowait((payload, token))

    async def close(self) -> None:
        """After the consumer stopped: also closes writers handed over while stopping."""
        self._owned = set()
        await self.release_partitions(set(self.writers) | set(self._acquiring))


def _session_hint(value: bytes | None) -> tuple[str, str, str | None] | None:
    """(session_id, tenant, command_id) from a record that is JSON but not a valid input."""
    try:
        data = json.loads(value or b"")
    except ValueError:
        return None
    if isinstance(data, dict) and isinstance(data.get("session_id"), str):
        command_id = data.get("command_id") if isinstance(data.get("command_id"), str) else None
        return data["session_id"], str(data.get("tenant", "")), command_id
    return None
