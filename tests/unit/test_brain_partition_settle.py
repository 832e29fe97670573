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
from wakeline.topics import EVENTS
from wakeline_brain.partitions import PartitionSet
from wakeline_brain.settings import BrainSettings
from wakeline_brain.writer import STRAY_PROBE_KEY


class FakeProducer:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    async def start(self) -> None: ...
    async def stop(self) -> None: ...

    async def begin_transaction(self) -> None:
        self.calls.append(("begin",))

    async def send(self, topic: str, value: bytes, *, key: bytes, partition: int) -> asyncio.Future:
        self.calls.append(("send", topic, value, key, partition))
        delivered = asyncio.get_running_loop().create_future()
        delivered.set_result(None)
        return delivered

    async def abort_transaction(self) -> None:
        self.calls.append(("abort",))


class FakeConsumer:
    def __init__(self) -> None:
        self.seeks: list[tuple[TopicPartition, int]] = []

    async def committed(self, tp: TopicPartition) -> int:
        return 7

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))


async def _no_actors(partitions: set[int]) -> None:
    return None


def partition_set(open_before, producers: list[FakeProducer] | None = None,
                  **settings) -> tuple[PartitionSet, FakeConsumer]:
    made = producers if producers is not None else []

    def new_producer(partition: int) -> FakeProducer:
        made.append(FakeProducer())
        return made[-1]
    ps = PartitionSet(BrainSettings(kafka_password="unused", **settings), OffsetTracker(), _no_actors,
                      new_producer, open_before=open_before)
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


async def test_one_still_open_after_the_probe_delay_is_ended_by_an_aborted_transaction_of_ours(caplog) -> None:
    """The hang test_weather found: a transaction of this producer id that the fence did not
    end. The writer's empty aborted transaction on events p ends it, and p goes live."""
    producers: list[FakeProducer] = []

    async def open_before(partition: int) -> str | None:
        aborted = any(("abort",) in p.calls for p in producers)
        return None if aborted else "a transaction is open: read-committed end 27 < log end 33"

    ps, consumer = partition_set(open_before, producers, settle_probe_after_s=0.05)
    await ps.on_partitions_assigned([TopicPartition("wakeline.inbox", 3)])
    await asyncio.sleep(0.02)
    assert 3 not in ps.writers and producers[0].calls == []  # not before the delay
    for _ in range(100):
        if 3 in ps.writers:
            break
        await asyncio.sleep(0.02)
    assert 3 in ps.writers
    [producer] = producers
    assert producer.calls == [("begin",), ("send", EVENTS, b"", STRAY_PROBE_KEY, 3), ("abort",)]
    assert any("aborting a transaction of ours" in r.getMessage() for r in caplog.records)
    await ps.close()


async def test_the_probe_is_made_once_and_a_transaction_it_cannot_end_still_times_out() -> None:
    """Another producer's transaction is not ours to end: one probe, then the usual timeout."""
    producers: list[FakeProducer] = []

    async def open_before(partition: int) -> str | None:  # closes on the second take
        return "a transaction is open" if len(producers) < 2 else None

    ps, _ = partition_set(open_before, producers, settle_probe_after_s=0.01, settle_timeout_s=0.3)
    await ps.on_partitions_assigned([TopicPartition("wakeline.inbox", 1)])
    for _ in range(300):
        if 1 in ps.writers:
            break
        await asyncio.sleep(0.02)
    assert 1 in ps.writers
    assert len(producers) == 2  # timed out once and was taken again from the start
    assert producers[0].calls.count(("abort",)) == 1  # one probe, not one per poll
    await ps.close()
