"""`PartitionWriter`: the single writer of one partition of `wakeline.events`.

Each owned partition p gets a transactional producer whose id is fixed per partition
(`wakeline-brain-p<p>`, built by `app.partition_producer`): when another brain takes p
over, its producer's start fences ours and aborts whatever we had in flight, so a
session never has two writers. The writer starts and stops the producer it is handed. Appends
are group-committed: one transaction carries the events, the tool calls they issue, and
the consumer offsets of p's inputs up to the lowest unfinished record.

Offsets ride in a transaction at most every `offsets_every_s` while records keep coming,
and in the record-less commit of a quiet moment: a transaction with offsets costs two
more requests to the coordinators (AddOffsetsToTxn, TxnOffsetCommit) than one without,
and every tool round trip waited for them (issue 10). What that leaves uncommitted is at
most that long of inputs whose events are already in the log; a crash redelivers them
and the sessions drop them as repeats (seen_inputs, the pending-call check), as they
always have for the inputs of the last transaction. A writer closed in good order
commits what it may first (`close`).

A writer whose transaction fails (fenced, the broker restarting, a leader change) is
done: it fails what was pending and tells its owner through `on_lost`, which gives the
partition back and takes it again with a fresh producer (see `partitions.PartitionSet`). It never
goes quiet while the brain keeps routing inputs to it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import Any, Protocol

from aiokafka.structs import TopicPartition

from wakeline.contract.topics import EVENTS
from wakeline.runtime import tracing
from wakeline.transport.offsets import OffsetTracker
from wakeline_brain.own_writes import OwnWrites

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Record:
    topic: str
    key: bytes
    value: bytes
    partition: int | None = None  # None: this writer's partition (re-routing names another)
    headers: list[tuple[str, bytes]] | None = None  # the trace context of whoever appended it


class TransactionalProducer(Protocol):
    """What the writer uses of aiokafka's `AIOKafkaProducer` with a `transactional_id`."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def transaction(self) -> AbstractAsyncContextManager[Any]: ...
    async def send(self, topic: str, value: bytes, *, key: bytes, partition: int) -> Any: ...
    async def send_offsets_to_transaction(self, offsets: dict[TopicPartition, int], group_id: str) -> None: ...
    async def begin_transaction(self) -> None: ...
    async def commit_transaction(self) -> None: ...
    async def abort_transaction(self) -> None: ...
    def add_to_transaction(self, tp: TopicPartition) -> None: ...


class WriterClosed(RuntimeError):
    """The partition was revoked or our producer was fenced: stop writing for it."""


class PartitionWriter:
    def __init__(self, partition: int, producer: TransactionalProducer, group_id: str, tracker: OffsetTracker,
                 inputs: list[TopicPartition],
                 on_lost: Callable[["PartitionWriter", BaseException], None] = lambda w, err: None,
                 offsets_every_s: float = 0.0, events_topic: str = EVENTS):
        self.partition = partition
        # The sessions we wrote on events p: a wake of any other skips its tail read (own_writes.py).
        self.own = OwnWrites()
        self._events_topic = events_topic
        self._producer = producer
        self._on_lost = on_lost
        self._group_id = group_id  # the consumer group whose offsets ride in our transactions
        self._tracker = tracker
        self._inputs = inputs  # the input partitions whose offsets this writer commits
        self._queue: asyncio.Queue[tuple[list[Record], asyncio.Future]] = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._closed = False
        self._txn = asyncio.Lock()  # one transaction at a time: the commit loop's or end_strays'
        self._offsets_every_s = offsets_every_s
        self._offsets_at = float("-inf")  # the loop's clock when offsets last rode in a transaction
        self._lost = False

    async def start(self) -> None:
        try:
            await self._producer.start()  # InitProducerId: fences the previous owner of this partition
        except BaseException:
            await self._producer.stop()  # a failed start must not leave a producer behind
            raise
        self._task = asyncio.create_task(self._loop(), name=f"writer-p{self.partition}")

    async def end_strays(self, partitions: list[TopicPartition]) -> None:
        """Commits a transaction of ours that holds `partitions` and no record.

        Its commit markers carry this producer's id, and a partition ends with one any
        transaction of that id still open there. Kafka can leave one open: a broker
        stopping as a transaction commits has logged the commit as complete without its
        markers on the partitions (seen in test_weather, docs/reliability.md), and every
        read-committed reader of those partitions (a wake, the archiver, the runner) then
        waits for good. Only p's writers, all with this transactional id, write these
        partitions, and this runs between our own transactions, so whatever it ends was
        left by a commit of ours. Committed, not aborted: the coordinator committed it, so
        our appenders were told it was written; a transaction that had failed is made
        visible whole, its inputs come again and are deduplicated, and its tool calls are
        issued again on wake under their ids, as after any crash."""
        async with self._txn:
            await self._producer.begin_transaction()
            try:
                for tp in partitions:
                    self._producer.add_to_transaction(tp)
            except BaseException:
                await self._producer.abort_transaction()
                raise
            await self._producer.commit_transaction()

    async def append(self, records: list[Record]) -> None:
        """Returns once the records are committed; raises WriterClosed if they never will be."""
        if self._closed:
            raise WriterClosed(f"partition {self.partition} is no longer ours")
        done = asyncio.get_running_loop().create_future()
        # The trace context is the appender's (an actor's task); the commit runs in the writer's.
        context = tracing.headers()
        records = [r if r.headers or not context else replace(r, headers=context) for r in records]
        await self._queue.put((records, done))
        await done

    async def close(self) -> None:
        self._closed = True
        cut = self._txn.locked()  # a transaction of ours the cancel below cuts short
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._fail_pending(WriterClosed("writer closed"))
        if not cut:
            await self._commit_offsets_before_closing()
        await self._producer.stop()

    async def _commit_offsets_before_closing(self, timeout_s: float = 2.0) -> None:
        """The offsets that waited for their turn (`offsets_every_s`), so whoever takes the
        partition next reads fewer inputs again. A courtesy, never needed for correctness:
        skipped when the producer is lost or `close` cut a transaction short, and refused
        by the broker if a new owner has fenced us already."""
        offsets = self._offsets_to_commit()
        if self._lost or not offsets or self._task is None:
            return
        try:
            async with asyncio.timeout(timeout_s):
                async with self._txn, self._producer.transaction():
                    await self._producer.send_offsets_to_transaction(offsets, self._group_id)
        except Exception as err:  # noqa: BLE001 - fenced, or the broker is away: the inputs come again
            log.info("partition %s: offsets not committed on close (%r); those inputs are read again",
                     self.partition, err)
            return
        self._tracker.mark_committed(offsets)

    async def _loop(self) -> None:
        try:
            while True:
                batch = await self._next_batch()
                await self._commit(batch)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # fenced, or the broker refused: this producer is done
            log.warning("writer for partition %s stopped: %r; handing the partition back", self.partition, err)
            self._closed = self._lost = True
            self._fail_pending(WriterClosed(str(err)))
            self._on_lost(self, err)

    async def _next_batch(self) -> list[tuple[list[Record], asyncio.Future]]:
        # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel that meets a get
        # completing at the same moment, and `close` then waited for this loop forever.
        try:
            async with asyncio.timeout(0.5):
                batch = [await self._queue.get()]
        except TimeoutError:
            return []  # nothing to write: a chance to commit offsets that moved on their own
        while not self._queue.empty() and len(batch) < 500:
            batch.append(self._queue.get_nowait())
        return batch

    async def _commit(self, batch: list[tuple[list[Record], asyncio.Future]]) -> None:
        now = asyncio.get_running_loop().time()
        due = not batch or now - self._offsets_at >= self._offsets_every_s
        offsets = self._offsets_to_commit() if due else {}
        if not batch and not offsets:
            return
        try:
            async with self._txn, self._producer.transaction():
                # Offsets first: sent after the records, the offset requests reach the
                # transaction coordinator while those records' produce request is in flight,
                # and Kafka 4's transaction verification answers that produce with
                # NOT_ENOUGH_REPLICAS (its CONCURRENT_TRANSACTIONS for old produce versions),
                # a 100 ms client backoff on the hot path. The transaction is atomic either way.
                if offsets:
                    await self._producer.send_offsets_to_transaction(offsets, self._group_id)
                for records, _ in batch:
                    for r in records:
                        traced = {"headers": r.headers} if r.headers else {}
                        partition = self.partition if r.partition is None else r.partition
                        delivery = await self._producer.send(r.topic, r.value, key=r.key, **traced,
                                                             partition=partition)
                        if r.topic == self._events_topic and partition == self.partition:
                            self.own.sent(r.key, delivery)
        except Exception as err:
            for _, done in batch:
                if not done.done():
                    done.set_exception(WriterClosed(str(err)))
            raise
        if offsets:
            self._tracker.mark_committed(offsets)
            self._offsets_at = now
        for _, done in batch:
            if not done.done():
                done.set_result(None)

    def _offsets_to_commit(self) -> dict[TopicPartition, int]:
        return self._tracker.to_commit(self._inputs)

    def _fail_pending(self, err: Exception) -> None:
        while not self._queue.empty():
            _, done = self._queue.get_nowait()
            if not done.done():
                done.set_exception(err)
