"""`Brain`: routes the inputs of the brain's partitions and runs one actor per session.

Malformed records go to the dead-letter topic, records on the wrong partition (a
producer with another partitioner) are re-routed to the right one — inside a transaction
with the offset, so never sequenced twice, with their headers — and the rest to their
session's actor, waking it if this brain does not hold it. A command without the gateway's
`wakeline-admitted` header goes as `Uncounted`: its actor counts it against its tenant's
rate quotas before handling it (quota_admission.py). The consume loop and the clients live
in `app.py`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime, timezone
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import ConsumerRecord, TopicPartition

from wakeline.contract import topics
from wakeline.runtime import tracing
from wakeline.contract.codec import MalformedRecord, decode, dead_letter_for, encode
from wakeline.contract.commands import CommandBase, ToolResultReport, WakeSession, parse_command
from wakeline.contract.quotas import ADMITTED_HEADER, Refusal, counted_against
from wakeline.contract.ids import time_ordered_id
from wakeline.contract.deltas import ModelDelta
from wakeline.contract.events import RejectionCode
from wakeline.contract.prices import PriceTable
from wakeline.transport.offsets import OffsetTracker
from wakeline.runtime.fair_slots import FairSlots
from wakeline.storage.turn_slots import TurnSlots
from wakeline_brain.actor import SessionActor
from wakeline_brain.actor_deps import ActorDeps
from wakeline_brain.mail import MalformedInput, Uncounted
from wakeline_brain.partitions import PartitionSet
from wakeline_brain.settings import BrainSettings
from wakeline_brain.tenant_quotas import TenantQuotas
from wakeline_brain.open_transactions import Held
from wakeline_brain.writer import PartitionWriter, Record, TransactionalProducer, WriterClosed

log = logging.getLogger(__name__)


class Brain:
    def __init__(self, settings: BrainSettings, load, model_for, tools: list[dict[str, Any]],
                 new_producer: Callable[[int], TransactionalProducer],
                 open_before: Callable[[int], Awaitable[list[Held]]] | None = None, load_prefix=None,
                 publish_delta: Callable[[ModelDelta], Awaitable[None]] | None = None,
                 turn_slots: TurnSlots | None = None,
                 admit: Callable[[CommandBase], Awaitable[Refusal | None]] | None = None,
                 tenant_quotas: TenantQuotas | None = None):
        self.settings = settings
        self.tracker = OffsetTracker()  # keyed by TopicPartition of the input topics
        self.actors: dict[str, tuple[SessionActor, asyncio.Task]] = {}
        # The consumer's rebalance listener: which partitions are live, with which writer.
        self.partitions = PartitionSet(settings, self.tracker, self._stop_actors, new_producer,
                                       **({"open_before": open_before} if open_before else {}))
        self.writers = self.partitions.writers  # live partitions only
        self._deps = ActorDeps(
            host=settings.host, idle_evict_s=settings.idle_evict_s, load=load, model_for=model_for,
            tools=tools, release=self._release, dead_letter=self._dead_letter_input,
            now=lambda: datetime.now(timezone.utc), new_id=time_ordered_id,
            max_record_bytes=settings.max_record_bytes, snapshot_every=settings.snapshot_every,
            snapshot_on_evict_after=settings.snapshot_on_evict_after, load_prefix=load_prefix,
            model_slots=FairSlots(settings.model_concurrency), model_retry_s=settings.model_retry_s,
            model_retry_max_s=settings.model_retry_max_s, publish_delta=publish_delta,
            model_linger_s=settings.model_linger_ms / 1000, prices=PriceTable.with_overrides(settings.model_prices),
            turn_slots=turn_slots, wake_sessions=self.wake_sessions, admit=admit, tenant_quotas=tenant_quotas)

    def attach(self, consumer: AIOKafkaConsumer) -> None:
        self.partitions.attach(consumer)

    async def _stop_actors(self, partitions: set[int]) -> None:
        doomed = [task for actor, task in self.actors.values() if actor.partition in partitions]
        for task in doomed:
            task.cancel()
        await asyncio.gather(*doomed, return_exceptions=True)

    # -- records ---------------------------------------------------------------------
    def dispatch(self, record: ConsumerRecord) -> None:
        tp = TopicPartition(record.topic, record.partition)
        writer = self.writers.get(record.partition)
        if writer is None:
            return  # not live (yet): being acquired reads it again, the next owner otherwise
        self.tracker.add(tp, record.offset)
        token = (tp, record.offset)
        tracing.remember(token, record.headers)  # continued by the actor that handles it
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
            # With its headers: a command the gateway admitted stays marked so (and keeps its trace).
            self._side_write(writer, [Record(record.topic, topics.record_key(item.session_id), record.value, right,
                                             list(record.headers) or None)], token)
            return
        mail = Uncounted(item) if record.topic == topics.INBOX and _uncounted(item, record.headers) else item
        self._actor_for(item.session_id, item.tenant, record.partition, writer).mailbox.put_nowait((mail, token))

    def _malformed(self, record: ConsumerRecord, writer: PartitionWriter, token: Any, reason: str,
                   code: RejectionCode = "malformed") -> None:
        letter = dead_letter_for(record.topic, record.partition, record.offset, record.key, record.value,
                                 f"{code}: {reason}", "brain")
        known = _session_hint(record.value)
        dead_letter = [Record(topics.DEAD_LETTER, record.key or b"", encode(letter))]
        if known and known[0] in self.actors:  # an input_rejected event where the session is known
            self._side_write(writer, dead_letter, None)
            command_id = known[2] or f"malformed:{record.topic}:{record.partition}:{record.offset}"
            self.actors[known[0]][0].mailbox.put_nowait((MalformedInput(command_id, reason, code), token))
        else:
            # Released once the letter is committed, as a re-routed record is. Released before,
            # the offset could be committed past the record while the letter still waited in
            # the writer's queue; a writer closed (the partition moved, shutdown) or lost then
            # drops the letter, and the record is never read again.
            self._side_write(writer, dead_letter, token)

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

    async def wake_sessions(self, tenant: str, session_ids: Sequence[str]) -> None:
        """A `wake_session` on the inbox for each session granted a running-session slot in its
        absence, through any live partition's writer (its transaction may name any partition).
        Never raises: a wake lost here (no partition live, the writer closed) is sent again by
        the slots' sweep (`sweep_slots`)."""
        writer = next(iter(self.writers.values()), None)
        if writer is None or not session_ids:
            return
        # Marked admitted: the brain's own wake is no command of the tenant's to count.
        records = [Record(topics.INBOX, topics.record_key(sid),
                          encode(WakeSession(command_id=time_ordered_id(), session_id=sid, tenant=tenant,
                                             actor="system:brain")),
                          topics.partition_for(sid, self.settings.partitions), headers=[(ADMITTED_HEADER, b"brain")])
                   for sid in session_ids]
        try:
            await writer.append(records)
        except Exception as err:
            log.warning("waking %d session(s) granted a running-session slot failed (%s); the sweep will",
                        len(records), err)

    async def sweep_slots(self, slots: TurnSlots, every_s: float) -> None:
        """Every `every_s`: what a crash left of the running-session slots put right, and the
        sessions still owed a wake woken (`TurnSlots.sweep`). Runs in every brain; at once on
        several, it wakes a session twice at worst."""
        while True:
            await asyncio.sleep(every_s)
            try:
                owed = await slots.sweep()
            except Exception as err:
                log.warning("sweeping the running-session slots failed (%s); trying again in %g s", err, every_s)
                continue
            by_tenant: dict[str, list[str]] = {}
            for tenant, session_id in owed:
                by_tenant.setdefault(tenant, []).append(session_id)
            for tenant, ids in by_tenant.items():
                await self.wake_sessions(tenant, ids)

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
            # Inputs were dead-lettered as they failed (SessionActor._park); what the actor held
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
        await self.partitions.close()


def _uncounted(command: CommandBase, headers: Sequence[tuple[str, bytes]] | None) -> bool:
    """A command that counts against a rate quota, from a client that did not count it (the
    gateway marks what it counted). Counted on its own partition only, so a re-routed one once."""
    return bool(counted_against(command)) and not any(key == ADMITTED_HEADER for key, _ in headers or ())


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
