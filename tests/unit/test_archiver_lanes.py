"""`stream.Pipeline`: one lane per partition. A partition's batches are stored one after
another in offset order; different partitions' batches are stored side by side, never
more at once than the concurrency allows; Kafka's copy of the offsets follows each
stored batch and never names an offset whose batch has not committed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from wakeline_archiver.gate import BatchGate
from wakeline_archiver.stream import Handler, Pipeline


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None = None
    value: bytes | None = None


def records(partition: int, first: int, count: int) -> list[Record]:
    return [Record("events", partition, offset) for offset in range(first, first + count)]


class SlowStore:
    """Holds every batch until released; records what ran, and how many ran at once."""

    def __init__(self) -> None:
        self.started: list[tuple[int, int]] = []   # (partition, first offset), in start order
        self.finished: list[tuple[int, int]] = []
        self.running = 0
        self.most_at_once = 0
        self.release: dict[tuple[int, int], asyncio.Event] = {}

    def gate_for(self, key: tuple[int, int]) -> asyncio.Event:
        return self.release.setdefault(key, asyncio.Event())

    async def store(self, batch: list[Record]) -> None:
        key = (batch[0].partition, batch[0].offset)
        assert len({r.partition for r in batch}) == 1, "a batch holds one partition"
        self.started.append(key)
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await self.gate_for(key).wait()
        finally:
            self.running -= 1
        self.finished.append(key)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_partitions_store_side_by_side_and_each_partition_in_offset_order() -> None:
    store, committed = SlowStore(), []

    async def commit(offsets):
        committed.append(dict(offsets))

    pipeline = Pipeline(Handler(list, store.store), BatchGate(), commit, concurrency=4)
    await pipeline.feed(records(0, 0, 3) + records(1, 10, 2) + records(2, 20, 1))
    await settle()
    assert sorted(store.started) == [(0, 0), (1, 10), (2, 20)]  # all three at once
    assert store.running == 3 and committed == []  # nothing committed while none finished

    feeding = asyncio.ensure_future(pipeline.feed(records(1, 12, 2) + records(0, 3, 1)))
    await settle()
    assert (1, 12) not in store.started and not feeding.done()  # partition 1's next waits for its first
    store.gate_for((1, 10)).set()
    await settle()
    assert (1, 12) in store.started
    assert committed and committed[-1] == {("events", 1): 12}  # only partition 1's stored batch
    assert (0, 3) not in store.started  # partition 0's first batch is still being stored
    store.gate_for((0, 0)).set()
    await settle()
    await asyncio.wait_for(feeding, 1)
    assert (0, 3) in store.started

    for key in [(2, 20), (1, 12), (0, 3)]:
        store.gate_for(key).set()
    await settle()
    assert [k for k in store.finished if k[0] == 0] == [(0, 0), (0, 3)]
    assert [k for k in store.finished if k[0] == 1] == [(1, 10), (1, 12)]
    merged: dict = {}
    for offsets in committed:
        merged.update(offsets)
    assert merged == {("events", 0): 4, ("events", 1): 14, ("events", 2): 21}
    pipeline.cancel()


@pytest.mark.parametrize("concurrency", [1, 2, 4])
async def test_no_more_batches_at_once_than_the_concurrency(concurrency: int) -> None:
    store = SlowStore()

    async def commit(offsets):
        return None

    pipeline = Pipeline(Handler(list, store.store), BatchGate(), commit, concurrency=concurrency)
    await pipeline.feed([r for p in range(5) for r in records(p, 100 * p, 2)])
    await settle()
    assert store.running == concurrency and len(store.started) == concurrency
    for partition in range(5):
        store.gate_for((partition, 100 * partition)).set()
    await settle()
    assert sorted(store.finished) == [(p, 100 * p) for p in range(5)]
    assert store.most_at_once == concurrency
    pipeline.cancel()


async def test_kafkas_copy_is_committed_at_most_every_commit_every_s_with_the_newest_offsets() -> None:
    store, committed = SlowStore(), []

    async def commit(offsets):
        committed.append(dict(offsets))

    pipeline = Pipeline(Handler(list, store.store), BatchGate(), commit, concurrency=4, commit_every_s=0.3)
    for first in (0, 2, 4):
        store.gate_for((0, first)).set()
        await pipeline.feed(records(0, first, 2))
        await settle()
    assert committed == [{("events", 0): 2}]  # the first at once; the next two wait out the interval
    await asyncio.sleep(0.4)
    assert committed == [{("events", 0): 2}, {("events", 0): 6}]  # then one commit, of the newest
    pipeline.cancel()
