"""Transactions left open on the partitions only p's writer writes (events and tool calls):
finding them (`OpenTransactions`), waiting out those from before our fence when a partition
is taken (`StrayTransactions.settled`), and ending the ones of our producer id that nothing
else will (`StrayTransactions.watch`). `partitions.PartitionSet` runs both.

A partition whose read-committed end (last stable offset) is short of its log end holds an
open transaction. Every read-committed reader of it (a wake, the archiver, the runner) waits
until it ends. Those from before our fence end on their own, their markers landing after the
commit was answered; but a broker that stops as a transaction commits can log the commit as
complete without writing its markers (seen in test_weather, docs/reliability.md), and
nothing then ever ends it but a commit of ours on that partition (`PartitionWriter.end_strays`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from wakeline.contract.topics import EVENTS, TOOL_CALLS
from wakeline.runtime.settings import CommonSettings
from wakeline.transport.kafka_io import kafka_auth
from wakeline_brain.metrics import STRAYS_ENDED
from wakeline_brain.settings import BrainSettings
from wakeline_brain.writer import PartitionWriter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Held:
    """A partition whose read-committed end (last stable offset) is short of its log end:
    a transaction is open on it."""

    tp: TopicPartition
    stable: int
    end: int

    def __str__(self) -> str:
        return f"{self.tp.topic}[{self.tp.partition}]: read-committed end {self.stable} < log end {self.end}"


class OpenTransactions:
    """Which of partition p of `topics` (the ones only p's writer writes: events and tool
    calls) hold an open transaction. Two consumers, one per isolation level, asking only for
    end offsets."""

    def __init__(self, settings: CommonSettings, topics: tuple[str, ...] = (EVENTS, TOOL_CALLS)):
        self._topics = topics
        common = dict(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), group_id=None,
                      enable_auto_commit=False)
        self._committed = AIOKafkaConsumer(**common, isolation_level="read_committed")
        self._uncommitted = AIOKafkaConsumer(**common, isolation_level="read_uncommitted")

    async def start(self) -> None:
        await self._committed.start()
        await self._uncommitted.start()

    async def stop(self) -> None:
        await self._committed.stop()
        await self._uncommitted.stop()

    async def __call__(self, partition: int) -> list[Held]:
        tps = [TopicPartition(topic, partition) for topic in self._topics]
        stable = await self._committed.end_offsets(tps)
        end = await self._uncommitted.end_offsets(tps)
        return [Held(tp, stable[tp], end[tp]) for tp in tps if stable[tp] < end[tp]]


class PartitionUnsettled(RuntimeError):
    """A transaction from before our fence is still open on the partition's events."""


class StrayTransactions:
    """`open_before(p)`: what is open on partition p now (an `OpenTransactions`)."""

    def __init__(self, settings: BrainSettings, open_before: Callable[[int], Awaitable[list[Held]]]):
        self.settings = settings
        self._open_before = open_before
        self._suspects: dict[int, tuple[tuple[TopicPartition, int], ...]] = {}  # held at the last look

    async def settled(self, partition: int, writer: PartitionWriter) -> None:
        """Waits until no transaction written before our fence is still open on events p
        (or tool calls p: the runner reads those read-committed too).

        A wake reads events p up to its read-committed end. A commit is answered once the
        coordinator has logged it, and its marker reaches the partition after that; a
        commit the previous writer had asked for when the broker went down is finished
        by the broker after it restarts. Until the marker lands, a wake does not see that
        transaction's events, folds an older state and writes a second history from there
        (seen in CI: a broker restart, then the archiver parked three sessions on
        conflicting events). Nothing of ours is open yet, so any gap between the
        read-committed end and the log end is from before us and will close; all but a
        commit whose markers were never written, which past `settle_probe_after_s` the
        writer ends with a commit of its own on the held partitions (`end_strays`).
        """
        loop = asyncio.get_running_loop()
        began = loop.time()
        deadline = began + self.settings.settle_timeout_s
        ended = False
        pause = 0.02
        while held := await self._open_before(partition):
            now = loop.time()
            if not ended and now > began + self.settings.settle_probe_after_s:
                ended = True
                await self._end(writer, held, f"{now - began:.1f} s after our fence")
                continue
            if now > deadline:
                raise PartitionUnsettled(f"partition {partition}: {'; '.join(map(str, held))} after "
                                         f"{self.settings.settle_timeout_s:g} s")
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)

    async def watch(self, writers: dict[int, PartitionWriter]) -> None:
        """Every `stray_check_s`, the live partitions' events and tool calls: one held at the
        same read-committed end two looks running is held by a transaction nothing will end
        (a commit of ours whose markers a stopping broker dropped, with our writer alive
        through the restart). Its sessions would wait for good, and the runner and archiver
        with them: the writer ends it (`end_strays`). A transaction of ours merely in flight
        at both looks is ended by its own commit first (end_strays waits for it), and the
        commit that follows ends nothing."""
        while True:
            await asyncio.sleep(self.settings.stray_check_s)
            for partition, writer in list(writers.items()):
                try:
                    held = await self._open_before(partition)
                    seen = tuple((h.tp, h.stable) for h in held)
                    if not held or self._suspects.get(partition) != seen:
                        self._suspects[partition] = seen  # new, moved on, or gone: look again next time
                        continue
                    self._suspects.pop(partition, None)
                    if writers.get(partition) is writer:
                        await self._end(writer, held, f"for {self.settings.stray_check_s:g} s")
                except Exception as err:  # noqa: BLE001 - the broker is away, or the writer was lost: look again later
                    log.warning("partition %s: looking for stray transactions failed: %r", partition, err)

    async def _end(self, writer: PartitionWriter, held: list[Held], since: str) -> None:
        log.warning("partition %s: %s, %s; committing a transaction of ours on %s to end the one of this "
                    "producer id there that nothing else will", writer.partition, "; ".join(map(str, held)), since,
                    " and ".join(str(h.tp.topic) for h in held))
        await writer.end_strays([h.tp for h in held])
        for h in held:
            STRAYS_ENDED.labels(h.tp.topic).inc()
