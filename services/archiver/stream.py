"""The archiver's stream: a faust app whose consumer hands over whole batches
(`transport.py`), and one pipeline per projected topic that stores them.

A handler has two halves: `prepare` (pure CPU: decoding, rows) and `store` (the
Postgres transaction). Each batch is split by partition into lanes. While a lane's
batch N is being stored, the next batch is already taken and prepared, so Python
decodes while Postgres writes; the lane's batch N+1 is stored only after N's
transaction committed, so within a partition batches commit one at a time and in
order. Lanes of different partitions store concurrently, up to
`archiver_concurrent_batches` transactions at once: a partition holds its sessions
whole (`topics.partition_for`), and the archive's offsets are per partition, so their
transactions touch different rows; while one waits on Postgres another runs Python
(issue 10). Kafka's copy of the offsets is committed only after the batch's
transaction (which holds the archive's own offsets) committed, so it never runs ahead
of the archive. No faust agents, streams or tables, no RocksDB, no web server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import faust
from aiokafka.helpers import create_ssl_context

from wakeline.contract.topics import DEAD_LETTER, EVENTS
from wakeline_archiver.gate import BatchGate
from wakeline_archiver.records import RawRecord
from wakeline_archiver.offsets import next_offsets
from wakeline_archiver.settings import ArchiverSettings
from wakeline_archiver.transport import ArchiverTransport, StoredPositions

log = logging.getLogger(__name__)
T = TypeVar("T")
Offsets = Mapping[tuple[str, int], int]
CommitPositions = Callable[[Offsets], Awaitable[None]]


@dataclass(frozen=True)
class Handler(Generic[T]):
    prepare: Callable[[Sequence[RawRecord]], T]  # pure: may run while the previous batch is stored
    store: Callable[[T], Awaitable[None]]


@dataclass(frozen=True)
class ArchivedTopics:
    """The topics projected; tests pass private ones so their records reach no other archiver."""

    events: str = EVENTS
    dead_letter: str = DEAD_LETTER


class Pipeline:
    """One topic's batches: one lane per partition, each prepared ahead and stored through
    the gate one batch at a time, in offset order; lanes store side by side, at most
    `concurrency` at once."""

    def __init__(self, handler: Handler[Any], gate: BatchGate, commit: CommitPositions, concurrency: int = 1,
                 commit_every_s: float = 0.0):
        self._handler, self._gate, self._commit = handler, gate, commit
        self._commit_every_s = commit_every_s
        self._slots = asyncio.Semaphore(concurrency)
        self._in_flight: dict[int, asyncio.Future[None]] = {}  # partition -> its lane's batch being stored
        self._to_commit: dict[tuple[str, int], int] = {}
        self._committing: asyncio.Future[None] | None = None

    async def feed(self, records: Sequence[RawRecord]) -> None:
        lanes: dict[int, list[RawRecord]] = {}
        for record in records:
            lanes.setdefault(record.partition, []).append(record)
        for partition, mine in lanes.items():
            prepared = self._handler.prepare(mine)
            in_flight = self._in_flight.get(partition)
            if in_flight is not None:
                await in_flight  # one transaction at a time per partition, in offset order
            self._in_flight[partition] = asyncio.ensure_future(self._store(prepared, next_offsets(
                (r.topic, r.partition, r.offset) for r in mine)))

    async def _store(self, prepared: Any, offsets: Offsets) -> None:
        async with self._slots:
            await self._gate.pass_batch(self._handler.store, prepared)  # returns only once committed
        self._commit_later(offsets)

    def _commit_later(self, offsets: Offsets) -> None:
        """Kafka's copy, off the batch path: one commit in flight, the newest positions next."""
        for key, at in offsets.items():
            self._to_commit[key] = max(at, self._to_commit.get(key, 0))
        if self._committing is None or self._committing.done():
            self._committing = asyncio.ensure_future(self._commit_pending())

    async def _commit_pending(self) -> None:
        while self._to_commit:
            offsets, self._to_commit = self._to_commit, {}
            try:
                await self._commit(offsets)
            except Exception as exc:  # noqa: BLE001 - tooling's copy (a stopping consumer, say); never the archive's
                log.warning("Kafka's copy of the archive's offsets was not committed (%r); the next batch "
                            "commits again", exc)
            if self._commit_every_s:
                await asyncio.sleep(self._commit_every_s)  # what comes meanwhile goes in the next one

    def cancel(self) -> None:
        """At stop: a batch still parked in the gate (a failed one) goes with the app."""
        for task in (*self._in_flight.values(), self._committing):
            if task is not None and not task.done():
                task.cancel()


class Batches:
    """What the consumer hands each batch to (`transport.Batches`): split by topic."""

    def __init__(self, settings: ArchiverSettings, pipelines: dict[str, Pipeline]):
        self.size, self.window_s = settings.archiver_batch_size, settings.archiver_batch_window_s
        self.pipelines = pipelines

    async def feed(self, records: Sequence[RawRecord]) -> None:
        for topic, pipeline in self.pipelines.items():
            mine = [r for r in records if r.topic == topic]
            if mine:
                await pipeline.feed(mine)

    def cancel(self) -> None:
        for pipeline in self.pipelines.values():
            pipeline.cancel()


def build_app(settings: ArchiverSettings, *, topics: ArchivedTopics, events: Handler, dead_letters: Handler,
              gate: BatchGate, stored_positions: StoredPositions) -> tuple[faust.App, Batches]:
    app = faust.App(
        settings.archiver_group,  # also the Kafka consumer group
        broker=f"kafka://{settings.kafka_bootstrap}",
        broker_credentials=_credentials(settings),
        datadir=str(settings.archiver_data_dir), store="memory://", web_enabled=False,
        autodiscover=False, topic_disable_leader=True, topic_allow_declare=False,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=settings.archiver_session_timeout_s,
        broker_heartbeat_interval=min(3.0, settings.archiver_session_timeout_s / 5),
        # Rebalances and shutdown do not wait for records taken: the gate lets the batch
        # in flight finish, and whatever else was taken is read again from the archive's
        # offsets, where a redelivery is a no-op.
        stream_wait_empty=False,
    )
    batches = Batches(settings, {})

    async def commit(offsets: Offsets) -> None:
        await app.consumer.commit_positions(offsets)  # type: ignore[attr-defined]
    app.transport = ArchiverTransport(app.conf.broker_consumer, app, stored_positions=stored_positions,
                                      batches=batches, fetch_max_wait_ms=settings.archiver_fetch_max_wait_ms)
    for topic, handler in ((topics.events, events), (topics.dead_letter, dead_letters)):
        # Subscribed through faust's conductor; acks off: faust never acknowledges these records.
        app.topics.add(app.topic(topic, key_type=bytes, value_type=bytes, key_serializer="raw",
                                 value_serializer="raw", acks=False))
        batches.pipelines[topic] = Pipeline(handler, gate, commit, settings.archiver_concurrent_batches,
                                             settings.archiver_commit_every_s)
    return app, batches


def _credentials(settings: ArchiverSettings) -> faust.SASLCredentials | None:
    """faust's form of `kafka_io.kafka_auth`: the archiver's principal, or none on PLAINTEXT."""
    if settings.kafka_security_protocol == "PLAINTEXT":
        return None
    principal, password = settings.kafka_login()
    tls = create_ssl_context() if settings.kafka_security_protocol == "SASL_SSL" else None
    return faust.SASLCredentials(username=principal, password=password, ssl_context=tls,
                                 mechanism=settings.kafka_sasl_mechanism)
