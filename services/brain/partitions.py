"""`PartitionSet`: which input partitions a brain serves, and the writer of each.

It is the brain consumer's rebalance listener. A partition is live once its writer has
fenced the previous owner, every transaction from before that fence has its marker on
the partition's events (`StrayTransactions.settled`, in open_transactions.py), and the
consumer has been put back to the committed offsets, which are final only after that
fence. Until then its records are dropped: the seek reads them again. A writer that dies
(broker restart, leader change, fence) takes the partition down the same way and it is
acquired again: weather, not an exit. The watch for transactions nothing will end runs
beside the live partitions (`StrayTransactions.watch`).

The group's protocol is eager (aiokafka has no cooperative one): every rebalance revokes
everything. Revocation is therefore not acted on; the assignment that follows says what
really moved. A partition we keep keeps its writer, actors and position, so a brain
joining or dying elsewhere does not pause our sessions. One that moved is safe to write
to until its new owner's writer fences ours.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.structs import TopicPartition

from wakeline.contract import topics
from wakeline.transport.offsets import OffsetTracker
from wakeline_brain.open_transactions import Held, StrayTransactions
from wakeline_brain.settings import BrainSettings
from wakeline_brain.writer import PartitionWriter, TransactionalProducer

log = logging.getLogger(__name__)
INPUT_TOPICS = (topics.INBOX, topics.TOOL_RESULTS)


async def _none_open(partition: int) -> list[Held]:
    return []


class PartitionSet(ConsumerRebalanceListener):
    def __init__(self, settings: BrainSettings, tracker: OffsetTracker,
                 stop_actors: Callable[[set[int]], Awaitable[None]],
                 new_producer: Callable[[int], TransactionalProducer],
                 open_before: Callable[[int], Awaitable[list[Held]]] = _none_open):
        self.settings = settings
        self.tracker = tracker
        self._new_producer = new_producer  # a fresh one per acquire: starting it fences the last
        self._strays = StrayTransactions(settings, open_before)
        self.consumer: AIOKafkaConsumer | None = None  # set by `attach`; seeks after a (re)acquire
        self.writers: dict[int, PartitionWriter] = {}  # live partitions only
        self._stop_actors = stop_actors
        self._owned: set[int] = set()  # assigned by the group, live or still being acquired
        self._acquiring: dict[int, asyncio.Task] = {}
        self._watching: asyncio.Task | None = None  # `StrayTransactions.watch`, from the first partition on

    def attach(self, consumer: AIOKafkaConsumer) -> None:
        self.consumer = consumer

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        pass

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        now = {tp.partition for tp in assigned}
        gone, self._owned = self._owned - now, now
        if gone:  # their sessions leave this brain's memory: the new owner wakes them
            log.info("brain %s gives up partitions %s (the group moved them)", self.settings.host, sorted(gone))
        await self.release(gone)
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
        if self._watching is None:
            self._watching = asyncio.create_task(self._strays.watch(self.writers), name="stray-transactions")
        if partition not in self._acquiring:
            self._acquiring[partition] = asyncio.create_task(self._acquire(partition), name=f"acquire-p{partition}")

    async def _acquire(self, partition: int) -> None:
        delay = 0.2
        clock = asyncio.get_running_loop().time
        try:
            while partition in self._owned:
                writer = self._new_writer(partition)
                try:
                    began = clock()
                    await writer.start()
                    fenced = clock()
                    await self._strays.settled(partition, writer)
                    settled = clock()
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
                # Where a take's time goes (bench/chaos/timelines.py reads it after a kill).
                log.info("brain %s owns partitions %s (p%d: fenced in %.3f s, settled in %.3f s, offsets in %.3f s)",
                         self.settings.host, sorted(self.writers), partition, fenced - began, settled - fenced,
                         clock() - settled)
                return
        finally:
            if self._acquiring.get(partition) is asyncio.current_task():
                del self._acquiring[partition]

    def _new_writer(self, partition: int) -> PartitionWriter:
        inputs = [TopicPartition(t, partition) for t in INPUT_TOPICS]
        return PartitionWriter(partition, self._new_producer(partition), self.settings.group_id, self.tracker,
                               inputs, on_lost=self._writer_lost, offsets_every_s=self.settings.offsets_every_s)

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
        await self.release({partition})
        if partition in self._owned:
            log.warning("partition %s: writer lost; acquiring it again", partition)
            self._start_acquiring(partition)

    async def release(self, partitions: set[int]) -> None:
        for partition in partitions:
            task = self._acquiring.pop(partition, None)
            if task:
                task.cancel()
        await self._stop_actors(partitions)
        for partition in partitions & set(self.writers):
            await self.writers.pop(partition).close()
            self.tracker.drop([TopicPartition(topic, partition) for topic in INPUT_TOPICS])

    async def close(self) -> None:
        if self._watching is not None:
            self._watching.cancel()
            await asyncio.gather(self._watching, return_exceptions=True)
        self._owned = set()
        await self.release(set(self.writers) | set(self._acquiring))
