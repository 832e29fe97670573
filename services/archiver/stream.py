"""The archiver's stream: one aiokafka consumer in the archiver's group reads both
projected topics and hands each topic's records to its handler, in batches, through the gate.

Read committed: the brain writes `wakeline.events` in Kafka transactions, and records of
an aborted one must never be archived. Positions: on every assignment each partition is
sought to the offset stored with the archive in Postgres, the truth (a partition the
archive has never seen starts at the beginning); Kafka commits trail the archive and
only serve tooling. Partition p of every topic holds the same sessions, and the range
assignor gives partition p of both topics to one member.

A handler has two halves: `prepare` (pure CPU: decoding, rows) and `store` (the Postgres
transaction). While batch N is stored, the stream already fetches and prepares batch
N+1, so Python decodes while Postgres writes; N+1 is stored only after N committed, so
batches commit one at a time and in offset order.

This replaced a faust app: faust's per-record machinery (a consumer thread, an event
object, queues and an ack per record) cost more CPU than decoding and storing the
records did (docs/profiles/archiver-*.svg); `getmany` hands over whole fetches.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from wakeline.kafka_io import make_consumer
from wakeline.topics import DEAD_LETTER, EVENTS
from wakeline.weather import is_weather
from wakeline_archiver.gate import BatchGate
from wakeline_archiver.records import RawRecord
from wakeline_archiver.settings import ArchiverSettings

log = logging.getLogger(__name__)
T = TypeVar("T")
StoredPositions = Callable[[], Awaitable[dict[tuple[str, int], int]]]
# A fetch can hold many batches' worth: bigger fetches, fewer round trips to the broker.
FETCH_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ArchivedTopics:
    """The topics projected; tests pass private ones so their records reach no other archiver."""

    events: str = EVENTS
    dead_letter: str = DEAD_LETTER


@dataclass(frozen=True)
class Handler(Generic[T]):
    prepare: Callable[[Sequence[RawRecord]], T]  # pure: may run while the previous batch is stored
    store: Callable[[T], Awaitable[None]]


class ArchiverStream:
    def __init__(self, settings: ArchiverSettings, *, topics: ArchivedTopics, events: Handler[Any],
                 dead_letters: Handler[Any], gate: BatchGate, stored_positions: StoredPositions):
        self._settings = settings
        self._handlers = ((topics.events, events), (topics.dead_letter, dead_letters))
        self._gate = gate
        session_ms = int(settings.archiver_session_timeout_s * 1000)
        self._consumer = make_consumer(
            settings, group_id=settings.archiver_group, session_timeout_ms=session_ms,
            partition_assignment_strategy=(RangePartitionAssignor,),
            heartbeat_interval_ms=min(3000, session_ms // 5), fetch_max_bytes=FETCH_BYTES,
            max_partition_fetch_bytes=FETCH_BYTES // 4)
        self._positioned: set[TopicPartition] = set()
        self._consumer.subscribe([topics.events, topics.dead_letter],
                                 listener=_SeekToArchive(self._consumer, stored_positions, gate, self._positioned))
        self._task: asyncio.Task[None] | None = None
        self.crash_reason: BaseException | None = None

    @property
    def crashed(self) -> bool:
        return self.crash_reason is not None

    async def start(self) -> None:
        await self._consumer.start()
        self._task = asyncio.create_task(self._run())

    async def wait_until_stopped(self) -> None:
        if self._task is not None:
            await asyncio.wait([self._task])

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._consumer.stop()

    async def _run(self) -> None:
        in_flight: asyncio.Future[None] | None = None
        window_ms = int(self._settings.archiver_batch_window_s * 1000)
        try:
            while not self._gate.closed.is_set():
                # Records of a partition not yet sought to the archive's offset were read from
                # Kafka's (or from the beginning) while the positions were being looked up: dropped,
                # they are read again from the archive's offset.
                fetched = {tp: rs for tp, rs in (await self._fetch(window_ms)).items() if tp in self._positioned}
                for topic, handler in self._handlers:
                    records = [r for tp, rs in fetched.items() if tp.topic == topic for r in rs]
                    if records:
                        prepared = handler.prepare(records)
                        if in_flight is not None:
                            await in_flight  # one transaction at a time, in offset order
                        in_flight = asyncio.ensure_future(self._store(handler, prepared, records))
            if in_flight is not None:
                await in_flight
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - app.run re-raises it
            self.crash_reason = exc
            log.critical("the archiver's consumer failed: %r", exc)
        finally:
            # Cancelled by stop: a batch still parked in the gate goes with the stream (it rolls back).
            if in_flight is not None and not in_flight.done():
                in_flight.cancel()

    async def _fetch(self, window_ms: int) -> dict[TopicPartition, list[Any]]:
        try:
            return await self._consumer.getmany(timeout_ms=window_ms, max_records=self._settings.archiver_batch_size)
        except KafkaError as exc:
            if not is_weather(exc):
                raise
            log.warning("fetching from Kafka failed (%r); retrying", exc)
            await asyncio.sleep(1.0)
            return {}

    async def _store(self, handler: Handler[Any], prepared: Any, records: list[Any]) -> None:
        await self._gate.pass_batch(handler.store, prepared)
        await self._commit_kafka(records)

    async def _commit_kafka(self, records: list[Any]) -> None:
        """Best effort, for tooling only: the archive's own offsets are already stored."""
        owned = self._consumer.assignment()
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for r in records:
            tp = TopicPartition(r.topic, r.partition)
            if tp in owned:
                offsets[tp] = OffsetAndMetadata(max(r.offset + 1, offsets[tp].offset if tp in offsets else 0), "")
        if offsets:
            try:
                await self._consumer.commit(offsets)
            except (KafkaError, AssertionError) as exc:  # a rebalance took the partition meanwhile
                log.debug("Kafka commit skipped: %r", exc)


class _SeekToArchive(ConsumerRebalanceListener):  # type: ignore[misc]
    """Seeks each assigned partition to the archive's offset; `positioned` holds those sought."""

    def __init__(self, consumer: AIOKafkaConsumer, stored_positions: StoredPositions, gate: BatchGate,
                 positioned: set[TopicPartition]):
        self._consumer, self._stored_positions, self._gate = consumer, stored_positions, gate
        self._positioned = positioned

    async def on_partitions_revoked(self, revoked: Any) -> None:
        # A batch in flight may finish: a redelivery to the next owner is a no-op.
        self._positioned.difference_update(revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._positioned.difference_update(assigned)
        self._consumer.pause(*assigned)  # no fetching from Kafka's offsets while the archive's are read
        try:
            stored = await self._stored_positions()
        except Exception as exc:  # noqa: BLE001 - without positions the archiver must not consume
            if not self._gate.closed.is_set():  # closed: it is stopping, and said why
                self._gate.fail(exc)
            return
        positions = {tp: stored.get((tp.topic, tp.partition), 0) for tp in assigned}
        for tp, at in positions.items():
            self._consumer.seek(tp, at)
        self._positioned.update(assigned)
        self._consumer.resume(*assigned)
        log.info("resuming from the archive's offsets %s", ", ".join(
            f"{tp.topic}[{tp.partition}]={at}" for tp, at in sorted(positions.items())) or "none")
