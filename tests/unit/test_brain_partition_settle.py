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

from wakeline.transport.offsets import OffsetTracker
from wakeline.contract.topics import EVENTS, TOOL_CALLS
from wakeline_brain.partitions import PartitionSet
from wakeline_brain.settings import BrainSettings
from wakeline_brain.open_transactions import Held


class FakeProducer:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    async def start(self) -> None: ...
    async def stop(self) -> None: ...

    async def begin_transaction(self) -> None:
        self.calls.append(("begin",))

    def add_to_transaction(self, tp: TopicPartition) -> None:
        self.calls.append(("add", tp))

    async def commit_transaction(self) -> None:
        self.calls.append(("commit",))

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


def held(partition: int, *topics: str, stable: int = 40, end: int = 44) -> list[Held]:
    return [Held(TopicPartition(t, partition), stable, end) for t in topics]


async def wait_live(ps: PartitionSet, partition: int, tries: int = 200) -> None:
    for _ in range(tries):
        if partition in ps.writers:
            return
        await asyncio.sleep(0.02)


async def test_a_partition_is_not_live_while_a_transaction_from_before_is_open() -> None:
    answers = [held(3, EVENTS)] * 3 + [[]]
    asked: list[int] = []

    async def open_before(partition: int) -> list[Held]:
        asked.append(partition)
        return answers[len(asked) - 1]

    ps, consumer = partition_set(open_before)
    await ps.on_partitions_assigned([TopicPartition("wakeline.inbox", 3)])
    await asyncio.sleep(0.01)
    assert 3 not in ps.writers and not consumer.seeks  # still open: not live, nothing re-read yet
    await wait_live(ps, 3, 100)
    assert 3 in ps.writers and asked == [3, 3, 3, 3]
    assert {tp.partition for tp, _ in consumer.seeks} == {3}  # positions set only once settled
    await ps.close()


async def test_one_that_stays_open_past_the_timeout_is_taken_again_from_the_start(caplog) -> None:
    calls = 0

    async def open_before(partition: int) -> list[Held]:
        nonlocal calls
        calls += 1
        return held(1, EVENTS) if calls < 8 else []

    ps, _ = partition_set(open_before, settle_timeout_s=0.05)
    await ps.on_partitions_assigned([TopicPartition("wakeline.inbox", 1)])
    await wait_live(ps, 1)
    assert 1 in ps.writers
    assert any("cannot take partition 1 yet" in r.getMessage() and "PartitionUnsettled" in r.getMessage()
               for r in caplog.records)
    await ps.close()


async def test_one_still_open_after_the_probe_delay_is_ended_by_a_commit_of_ours_on_the_held_partitions(
        caplog) -> None:
    """The hang test_weather found: markers a stopping broker never wrote. The writer's
    record-less transaction on the held partitions is committed, its markers end the stray,
    and p goes live."""
    producers: list[FakeProducer] = []

    async def open_before(partition: int) -> list[Held]:
        ended = any(("commit",) in p.calls for p in producers)
        return [] if ended else held(3, EVENTS, TOOL_CALLS, stable=27, end=33)

    ps, consumer = partition_set(open_before, producers, settle_probe_after_s=0.05)
    await ps.on_partitions_assigned([TopicPartition("wakeline.inbox", 3)])
    await asyncio.sleep(0.02)
    assert 3 not in ps.writers and producers[0].calls == []  # not before the delay
    await wait_live(ps, 3, 100)
    assert 3 in ps.writers
    [producer] = producers
    assert producer.calls == [("begin",), ("add", TopicPartition(EVENTS, 3)), ("add", TopicPartition(TOOL_CALLS, 3)),
                              ("commit",)]
    assert any("read-committed end 27 < log end 33" in r.getMessage() and "committing a transaction of ours"
               in r.getMessage() for r in caplog.records)
    await ps.close()


async def test_the_end_is_tried_once_a_take_and_a_transaction_it_cannot_end_still_times_out() -> None:
    """One of another producer id is not ended by ours: one try, then the usual timeout."""
    producers: list[FakeProducer] = []

    async def open_before(partition: int) -> list[Held]:  # closes on the second take
        return held(1, EVENTS) if len(producers) < 2 else []

    ps, _ = partition_set(open_before, producers, settle_probe_after_s=0.01, settle_timeout_s=0.3)
    await ps.on_partitions_assigned([TopicPartition("wakeline.inbox", 1)])
    await wait_live(ps, 1, 300)
    assert 1 in ps.writers
    assert len(producers) == 2  # timed out once and was taken again from the start
    assert producers[0].calls.count(("commit",)) == 1  # one try, not one per poll


async def test_a_live_partition_held_at_the_same_end_two_looks_running_is_ended_and_a_moving_one_is_not() -> None:
    """The case of run 35 (docs/reliability.md): the writer lived through the restart, so no
    take ever looks. The watch ends what stays held; a read-committed end that moves between
    looks is a transaction of ours committing, left alone."""
    producers: list[FakeProducer] = []
    looks = {4: 0, 5: 0}

    async def open_before(partition: int) -> list[Held]:
        if partition not in looks:
            return []
        looks[partition] += 1
        if looks[partition] == 1:
            return []  # the take: nothing open yet
        if partition == 4:  # stuck at 120 until our commit ends it
            return [] if any(("commit",) in p.calls for p in producers) else held(4, EVENTS, stable=120, end=122)
        return held(5, TOOL_CALLS, stable=looks[partition], end=looks[partition] + 1)  # moving on

    ps, _ = partition_set(open_before, producers, stray_check_s=0.05)
    await ps.on_partitions_assigned([TopicPartition("wakeline.inbox", 4), TopicPartition("wakeline.inbox", 5)])
    await wait_live(ps, 4)
    await wait_live(ps, 5)
    for _ in range(100):
        if looks[5] >= 6 and any(("commit",) in p.calls for p in producers):
            break
        await asyncio.sleep(0.02)
    by_partition = {ps.writers[p]._producer: p for p in (4, 5)}  # type: ignore[attr-defined]
    calls = {by_partition[p]: p.calls for p in producers}
    assert calls[4] == [("begin",), ("add", TopicPartition(EVENTS, 4)), ("commit",)]  # once: it then closed
    assert calls[5] == [] and looks[5] >= 6
    await ps.close()
