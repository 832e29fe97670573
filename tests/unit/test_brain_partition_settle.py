"""A partition goes live only once no transaction from before our fence is open on its events.

The case it guards (seen in CI): the broker restarts while a writer's commit is in flight;
the broker finishes that commit after it is back, and a wake that read the partition before
the marker landed would fold an older state and write a second history. Fakes stand in for
the consumer and the producer; `OpenTransactions` itself runs on the real broker in
tests/integration/test_brain_open_transactions.py.
"""

from __future__ import annotations

import asyncio

from aiokafka.structs import TopicPartition

from wakeline.offsets import OffsetTracker
from wakeline_brain.partitions import PartitionSet
from wakeline_brain.settings import BrainSettings


class FakeProducer:
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


class FakeConsumer:
    def __init__(self) -> None:
        self.seeks: list[tuple[TopicPartition, int]] = []

    async def committed(self, tp: TopicPartition) -> int:
        return 7

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))


async def _no_actors(partitions: set[int]) -> None:
    return None


def partition_set(open_before, **settings) -> tuple[PartitionSet, FakeConsumer]:
    ps = PartitionSet(BrainSettings(kafka_password="unused", **settings), OffsetTracker(), _no_actors,
                      lambda p: FakeProducer(), open_before=open_before)
    consumer = FakeConsumer()
    ps.attach(consumer)  # type: ignore[arg-type]
    return ps, consumer


async def test_a_partition_is_not_live_while_a_transaction_from_before_is_open() -> None:
    answers = ["a transaction is open: read-committed end 40 < log end 44"] * 3 + [None]
    asked: list[int] = []

    async def open_before(partition: int) -> str | None:
        asked.append(partition)
        return answers[len(asked) - 1]

    ps, consumer = partition_set(open_before)
    await ps.on_partitions_assigned([TopicPartition("wakeline.inbox", 3)])
    await asyncio.sleep(0.01)
    assert 3 not in ps.writers and not consumer.seeks  # still open: not live, nothing re-read yet
    for _ in range(100):
        if 3 in ps.writers:
            break
        await asyncio.sleep(0.02)
    assert 3 in ps.writers and asked == [3, 3, 3, 3]
    assert {tp.partition for tp, _ in consumer.seeks} == {3}  # positions set only once settled
    await ps.close()


async def test_one_that_stays_open_past_the_timeout_is_taken_again_from_the_start(caplog) -> None:
    calls = 0

    async def open_before(partition: int) -> str | None:
        nonlocal calls
        calls += 1
        return "a transaction is open" if calls < 8 else None

    ps, _ = partition_set(open_before, settle_timeout_s=0.05)
    await ps.on_partitions_assigned([TopicPartition("wakeline.inbox", 1)])
    for _ in range(200):
        if 1 in ps.writers:
            break
        await asyncio.sleep(0.02)
    assert 1 in ps.writers
    assert any("cannot take partition 1 yet" in r.getMessage() and "PartitionUnsettled" in r.getMessage()
               for r in caplog.records)
    await ps.close()
