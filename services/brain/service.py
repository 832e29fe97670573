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

from aiokafka import ConsumerRebalanceListener
from aiokafka.structs import ConsumerRecord, TopicPartition

from wakeline import topics
from wakeline.codec import MalformedRecord, decode, dead_letter_for, encode
from wakeline.commands import ToolResultReport, parse_command
from wakeline.offsets import OffsetTracker
from wakeline_brain.actor import ActorDeps, MalformedInput, SessionActor
from wakeline_brain.settings import BrainSettings
from wakeline_brain.writer import PartitionWriter, Record

log = logging.getLogger(__name__)
INPUT_TOPICS = (topics.INBOX, topics.TOOL_RESULTS)


class Brain(ConsumerRebalanceListener):
    def __init__(self, settings: BrainSettings, load, model_for, tools: list[dict[str, Any]]):
        self.settings = settings
        self.writers: dict[int, PartitionWriter] = {}
        self.tracker = OffsetTracker()  # keyed by TopicPartition of the input topics
        self.actors: dict[str, tuple[SessionActor, asyncio.Task]] = {}
        self.failure: BaseException | None = None
        self._early: dict[int, list[ConsumerRecord]] = {}
        self._deps = ActorDeps(
            host=settings.host, idle_evict_s=settings.idle_evict_s, load=load, model_for=model_for,
            tools=tools, release=self._release, dead_letter=self._dead_letter_input,
            now=lambda: datetime.now(timezone.utc), new_id=lambda: str(uuid.uuid4()))

    # -- partitions ------------------------------------------------------------------
    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        # Records of a new partition can arrive before its writer has fenced the previous
        # owner; they wait in `_early` until it has.
        new = sorted({tp.partition for tp in assigned} - set(self.writers))
        self._early.update({p: [] for p in new})
        await asyncio.gather(*(self._take_partition(p) for p in new))
        log.info("brain %s owns partitions %s", self.settings.host, sorted(self.writers))

    async def _take_partition(self, partition: int) -> None:
        inputs = [TopicPartition(t, partition) for t in INPUT_TOPICS]
        writer = PartitionWriter(self.settings, partition, self.settings.group_id, self.tracker, inputs)
        await writer.start()
        self.writers[partition] = writer
        for record in self._early.pop(partition, []):
            self.dispatch(record)

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self.release_partitions({tp.partition for tp in revoked})

    async def release_partitions(self, partitions: set[int]) -> None:
        for partition in partitions:
            self._early.pop(partition, None)
        doomed = [(a, t) for a, t in self.actors.values() if a.partition in partitions]
        for _, task in doomed:
            task.cancel()
        await asyncio.gather(*(t for _, t in doomed), return_exceptions=True)
        for partition in partitions & set(self.writers):
            await self.writers.pop(partition).close()
            self.tracker.drop([TopicPartition(topic, partition) for topic in INPUT_TOPICS])

    # -- records ---------------------------------------------------------------------
    def dispatch(self, record: ConsumerRecord) -> None:
        if record.partition in self._early:
            self._early[record.partition].append(record)
            return
        tp = TopicPartition(record.topic, record.partition)
        writer = self.writers.get(record.partition)
        if writer is None:
            return  # revoked while the batch was in hand; the next owner reads it again
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
            self._side_write(writer, [Record(record.topic, topics.record_key(item.session_id), record.value, right)],
                             token)
            return
        self._actor_for(item.session_id, item.tenant, record.partition, writer).mailbox.put_nowait((item, token))

    def _malformed(self, record: ConsumerRecord, writer: PartitionWriter, token: Any, reason: str) -> None:
        letter = dead_letter_for(record.topic, record.partition, record.offset, record.key, record.value,
                                 reason, "brain")
        known = _session_hint(record.value)
        self._side_write(writer, [Record(topics.DEAD_LETTER, record.key or b"", encode(letter))], None)
        if known and known[0] in self.actors:  # an input_rejected event where the session is known
            command_id = known[2] or f"malformed:{record.topic}:{record.partition}:{record.offset}"
            self.actors[known[0]][0].mailbox.put_nowait((MalformedInput(command_id, reason), token))
        else:
            self._release([token])

    def _side_write(self, writer: PartitionWriter, records: list[Record], token: Any) -> None:
        async def write() -> None:
            await writer.append(records)
            if token is not None:
                self._release([token])
        asyncio.create_task(write())

    async def _dead_letter_input(self, item: Any, reason: str) -> None:
        partition = topics.partition_for(item.session_id, self.settings.partitions)
        letter = dead_letter_for(topics.INBOX, partition, -1, topics.record_key(item.session_id),
                                 item.model_dump_json().encode(), reason, "brain")
        await self.writers[partition].append([Record(topics.DEAD_LETTER, topics.record_key(item.session_id),
                                                     encode(letter))])

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
        except asyncio.CancelledError:
            pass
        except Exception as err:
            if not isinstance(err, _writer_closed()):
                log.exception("session %s failed; stopping the brain", actor.session_id)
                self.failure = err
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
        await self.release_partitions(set(self.writers))


def _writer_closed():
    from wakeline_brain.writer import WriterClosed
    return WriterClosed


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
