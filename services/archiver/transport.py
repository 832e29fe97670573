"""faust's aiokafka transport with the three changes the archiver needs.

1. Read committed. The brain writes `wakeline.events` in Kafka transactions; reading
   uncommitted would archive events of aborted transactions. faust only reads committed
   under `processing_guarantee="exactly_once"`, which also turns its producer into one
   transaction per partition; we want the reading half alone. Also a fetch's wait of
   `archiver_fetch_max_wait_ms`, not faust's fixed 1.5 s (settings.py says why).
2. Postgres positions. faust seeks each assigned partition to the group's committed
   Kafka offset; the offsets stored with the archive are the truth, so we then seek to
   those (a partition the archive has never seen starts at the beginning). Kafka's
   commits trail ours and only serve tooling.
3. Whole batches. faust hands records one at a time to its conductor, streams and acks
   (a task, a queue hop and an ack per record: a third of the archiver's CPU, issue 10).
   The archiver's unit is a batch, so the consumer's fetch loop takes records straight
   from faust's consumer thread, up to `size` of what arrives within `window_s`, and
   hands each batch to `Batches` (`stream.py`). Group membership, assignment, pausing on
   a rebalance and the seek above stay faust's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from time import monotonic
from typing import Any, Protocol

from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from faust.transport.drivers import aiokafka as driver
from faust.types import TP

from wakeline.contract.topics import ARCHIVE_NOW_HEADER

log = logging.getLogger(__name__)
StoredPositions = Callable[[], Awaitable[dict[tuple[str, int], int]]]


class Batches(Protocol):
    size: int        # the most records one batch holds
    window_s: float  # how long a batch gathers after its first record

    async def feed(self, records: Sequence[Any]) -> None: ...


class _ReadCommittedThread(driver.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # The consumer is built, not started: the fetcher takes this value at start().
        if getattr(consumer, "_isolation_level", None) not in ("read_uncommitted", "read_committed"):
            raise RuntimeError("aiokafka's consumer no longer exposes _isolation_level; "
                               "the archiver cannot make faust read committed")
        consumer._isolation_level = "read_committed"
        # faust builds the consumer with fetch_max_wait_ms=1500 and has no setting for it; how
        # that stalls a backlog: `ArchiverSettings.archiver_fetch_max_wait_ms`
        if not hasattr(consumer, "_fetch_max_wait_ms"):
            raise RuntimeError("aiokafka's consumer no longer exposes _fetch_max_wait_ms; "
                               "the archiver cannot bound its fetches' wait")
        consumer._fetch_max_wait_ms = transport.fetch_max_wait_ms
        return consumer


class ArchiverConsumer(driver.Consumer):
    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return _ReadCommittedThread(self, loop=self.loop, beacon=self.beacon)

    async def seek_to_committed(self) -> Mapping[TP, int]:
        committed = await super().seek_to_committed()
        stored = await self.transport.stored_positions()  # type: ignore[attr-defined]
        positions = {tp: stored.get((tp.topic, tp.partition), 0) for tp in self.assignment()}
        moved = {tp: at for tp, at in positions.items() if committed.get(tp) != at}
        if moved:
            await self.seek_wait(moved)
        log.info("resuming from the archive's offsets %s (Kafka had %s)",
                 _show(positions), _show({tp: committed.get(tp) for tp in moved}))
        return positions

    async def _drain_messages(self, fetcher: Any) -> None:
        """faust's fetch loop, batch by batch: what `Fetcher` runs while the app is up."""
        batches: Batches = self.transport.batches  # type: ignore[attr-defined]
        carried: list[Any] = []
        try:
            while not (self.should_stop or fetcher.should_stop):
                generation = self.app.consumer_generation_id
                taken = await self._take(carried, batches.size, batches.window_s)
                if taken is None:
                    carried = []
                    await self._reread_from_archive()
                    continue
                batch, carried = taken[:batches.size], taken[batches.size:]
                if batch:
                    await batches.feed(batch)
                if self.app.consumer_generation_id != generation:
                    carried = []  # taken before a rebalance: read again from the archive's offsets
                    await self._reread_from_archive()
        except (asyncio.CancelledError, *self.consumer_stopped_errors):
            if not self.transport.app.should_stop:  # as faust's loop: the fetcher restarts after a rebalance
                raise

    async def _take(self, carried: list[Any], size: int, window_s: float) -> list[Any] | None:
        """`carried` and what arrives within `window_s` of the first record, until `size`, or
        until a fetch brings a record marked `ARCHIVE_NOW_HEADER`.

        None when records were set aside: a rebalance came in between (the partitions'
        owner reads them again from the archive's offsets) or a fetch held records of a
        partition that is not active. The caller must then put the consumer back at the
        archive's offsets (`_reread_from_archive`): the fetch that saw the new generation
        may already hold records read *after* the rebalance's own seek, and dropping those
        without seeking again would let the next batch store offsets past them (the gap
        `make chaos` run 9 found: "seq n-1 is not archived")."""
        generation = self.app.consumer_generation_id
        taken, deadline = list(carried), (monotonic() + window_s if carried else None)
        while len(taken) < size and not self.should_stop:
            wait = 1.0 if deadline is None else deadline - monotonic()
            if wait <= 0:
                break
            records, active = await self._wait_next_records(wait)
            if self.app.consumer_generation_id != generation:
                return None
            now = False
            for tp, fetched in (records or {}).items():
                if active is not None and tp not in active:
                    return None
                taken.extend(fetched)
                now = now or any(map(archive_now, fetched))
            if now:
                break  # somebody waits to read one of these back: no more gathering
            if taken and deadline is None:
                deadline = monotonic() + window_s
        return taken

    async def _reread_from_archive(self) -> None:
        """Seeks every assigned partition to the archive's offsets, once the group is settled.

        Reading again from there is always safe: the archive's offsets never run ahead of
        what it stores, and a record stored already is a no-op when it comes again (a batch
        still committing only makes the stored offsets lag, never lead)."""
        while not self.should_stop:
            if not self.flow_active:
                await self.wait(self.can_resume_flow)  # the rebalance's own seek comes first
                continue
            generation = self.app.consumer_generation_id
            try:
                await self.seek_to_committed()
            except KafkaError as exc:  # a partition revoked under the seek: the next rebalance seeks again
                log.info("seeking back to the archive's offsets was interrupted (%r); retrying", exc)
                await asyncio.sleep(0.1)
                continue
            if self.app.consumer_generation_id == generation:
                return

    async def commit_positions(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Kafka's copy of positions the archive already holds (tooling; never read back).

        Not through faust's `_commit`, which crashes the consumer (and so the archiver) on
        an unexpected commit error: a copy that is late or missing costs tooling a stale
        figure, never the archive, so a failure is logged and the next batch tries again."""
        thread = self._thread

        async def commit() -> None:
            consumer = thread._ensure_consumer()
            assigned = consumer.assignment()
            mine = {TopicPartition(t, p): OffsetAndMetadata(at, "") for (t, p), at in offsets.items()
                    if TopicPartition(t, p) in assigned}
            if not mine:
                return
            try:
                await consumer.commit(mine)
            except Exception as exc:  # noqa: BLE001 - see above
                log.warning("Kafka's copy of the archive's offsets was not committed (%r); the archive "
                            "holds them, the next batch commits again", exc)
        await thread.call_thread(commit)


class ArchiverTransport(driver.Transport):
    Consumer = ArchiverConsumer

    def __init__(self, url: Any, app: Any, *, stored_positions: StoredPositions, batches: Batches,
                 fetch_max_wait_ms: int = 1500):
        super().__init__(url, app)
        self.stored_positions = stored_positions
        self.batches = batches
        self.fetch_max_wait_ms = fetch_max_wait_ms


def _show(positions: Mapping[TP, int | None]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]={at}" for tp, at in sorted(positions.items())) or "none"


def archive_now(record: Any) -> bool:
    """The brain marked this record as one a caller waits to read back (`ARCHIVE_NOW_HEADER`)."""
    return any(key == ARCHIVE_NOW_HEADER for key, _ in getattr(record, "headers", None) or ())
