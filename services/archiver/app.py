"""`run(settings, stop)`: the archiver process, wired in one place.

Opens the Postgres pool, a producer for dead letters and a lag probe, starts the faust
app (`stream.py`), and waits for SIGTERM (`stop`), a projection failure (the gate
closed) or faust itself stopping. On the way out the batch in flight may finish; then faust stops. A
projection failure is re-raised, so the process exits non-zero and says why; bad data
and infrastructure weather are not projection failures (see `archiver`, `weather`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
from contextlib import AsyncExitStack
from functools import partial

from aiokafka import AIOKafkaProducer

from wakeline.contract.codec import DeadLetter, encode
from wakeline.transport.kafka_io import make_producer
from wakeline.storage.event_store import EventStore
from wakeline.storage.pg import TenantPool
from wakeline.storage.postgres_store import PostgresEventStore
from wakeline_archiver.stream import ArchivedTopics, Handler, build_app
from wakeline_archiver.archiver import EventArchiver, SendDeadLetter
from wakeline_archiver.dead_letters import DeadLetterArchiver, letter_rows
from wakeline_archiver.gate import BatchGate
from wakeline_archiver.lag import LagProbe
from wakeline_archiver.metrics import record_lag, sized, start_counting
from wakeline_archiver.quarantine import Quarantine
from wakeline_archiver.settings import ArchiverSettings
from wakeline_archiver.traces import traced
from wakeline_archiver.triage import decode_all
from wakeline_archiver.weather import ride_out

log = logging.getLogger(__name__)
DRAIN_TIMEOUT_S = 30.0
GC_THRESHOLD = 50_000  # allocations between young-generation collections (default 700)


async def run(settings: ArchiverSettings, stop: asyncio.Event, topics: ArchivedTopics = ArchivedTopics()) -> None:
    """`topics` is for tests, which project private topics; the service uses the defaults."""
    settings.archiver_data_dir.mkdir(parents=True, exist_ok=True)
    gate = BatchGate()
    async with AsyncExitStack() as stack:
        pool = await stack.enter_async_context(
            TenantPool(settings.postgres_dsn, "wakeline-archiver", min_size=1,
                       # a connection per concurrent batch, and room for quarantine look-ups and the lag probe
                       max_size=max(settings.archiver_pool_size, settings.archiver_concurrent_batches + 2)))
        producer = make_producer(settings)
        await producer.start()
        stack.push_async_callback(producer.stop)
        probe = await stack.enter_async_context(LagProbe(settings, topics.events))
        store, group = PostgresEventStore(pool), settings.archiver_group
        events = EventArchiver(store, group, Quarantine(store, group),
                               _dead_letter_sender(producer, topics.dead_letter))
        letters = DeadLetterArchiver(pool, settings.archiver_group)
        store_events = sized(traced(events.archive_decoded))  # metrics and traces around the insert
        app, batches = build_app(settings, topics=topics, events=Handler(decode_all, store_events),
                        dead_letters=Handler(letter_rows, letters.archive_rows), gate=gate,
                        stored_positions=partial(_stored_positions, store, group, topics, gate))
        reporter = asyncio.create_task(_report_lag(settings, probe, pool, events, gate))
        counting = start_counting(events)
        try:
            await app.start()
            _tune_collector()
            log.info("archiver %s started", settings.archiver_group)
            await _first_of(stop.wait(), gate.closed.wait(), app.wait_until_stopped())
        finally:
            reporter.cancel()
            counting.cancel()
            gate.close()
            await _drain(gate)
            await app.stop()
            batches.cancel()
    if gate.failure is not None:
        raise gate.failure
    if app.crashed:
        raise RuntimeError(f"faust stopped the archiver: {app.crash_reason!r}") from app.crash_reason
    log.info("archiver %s stopped", settings.archiver_group)


def _tune_collector() -> None:
    """Decoding allocates several objects per event, none in cycles that outlive a batch; at
    the default threshold (700) the cyclic collector ran every few events and re-walked
    what start-up built (faust, clients, schemas). Collect less often; leave that alone."""
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])


async def _stored_positions(store: EventStore, group: str, topics: ArchivedTopics,
                            gate: BatchGate) -> dict[tuple[str, int], int]:
    # Read at every assignment: a rebalance during a database restart waits it out.
    positions: dict[tuple[str, int], int] = {}

    async def read() -> None:
        positions.update(await store.archived_offsets(group, (topics.events, topics.dead_letter)))
    if not await ride_out(read, "reading the archive's offsets", gate.closed):
        raise RuntimeError("stopped while waiting for the archive's offsets")
    return positions


def _dead_letter_sender(producer: AIOKafkaProducer, topic: str) -> SendDeadLetter:
    async def send(letter: DeadLetter, key: bytes | None, partition: int) -> None:
        # Same partition as the rejected record: partition p of every topic holds the same sessions.
        await producer.send_and_wait(topic, encode(letter), key=key, partition=partition)
    return send


async def _first_of(*waits) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _drain(gate: BatchGate) -> None:
    try:
        await asyncio.wait_for(gate.drained(), DRAIN_TIMEOUT_S)
    except TimeoutError:
        log.warning("a batch was still in flight after %ss; stopping anyway (it rolls back)", DRAIN_TIMEOUT_S)


class StalledArchiver(RuntimeError):
    """Events wait in Kafka but none has been processed for a long time."""


class StallWatch:
    """True once records wait and the processed count has not moved for `limit` seconds."""

    def __init__(self, limit: float):
        self.limit, self._done, self._since = limit, None, None

    def stalled(self, done: int, waiting: int, now: float) -> bool:
        if done != self._done or not waiting:
            self._done, self._since = done, now
            return False
        return now - self._since > self.limit


async def _report_lag(settings: ArchiverSettings, probe: LagProbe, pool: TenantPool, events: EventArchiver,
                      gate: BatchGate) -> None:
    # Seen after a broker restart: faust's consumer never resumed fetching. A stalled
    # projection must not look alive, so it stops the process loudly and a supervisor
    # (or the operator) starts a fresh one, which resumes from the Postgres offsets.
    watch = StallWatch(settings.archiver_stall_exit_s)
    while True:
        await asyncio.sleep(settings.archiver_lag_log_interval_s)
        try:
            lag = await probe.measure(pool, settings.archiver_group)
        except Exception as exc:  # noqa: BLE001 - a missed report is not a projection failure
            log.warning("could not measure archiver lag: %r", exc)
            continue
        record_lag(lag)
        log.info("lag %s; events archived %d, redelivered %d, dead-lettered %d, sessions parked %d",
                 " ".join(f"p{p}={v['lag']}" for p, v in sorted(lag.items())),
                 events.archived, events.redelivered, events.rejected, events.parked)
        waiting = sum(v["lag"] for v in lag.values())
        done = events.archived + events.redelivered + events.rejected
        if watch.stalled(done, waiting, asyncio.get_running_loop().time()):
            gate.fail(StalledArchiver(f"{waiting} events wait and none was processed for"
                                      f" {settings.archiver_stall_exit_s:g} s; stopping so a fresh archiver resumes"))
            return
