"""`PartitionWriter` over a `FakeProducer`: what goes into each transaction, and what a
failed one does. The real producer (fencing, a broker restart) is covered on the real
stack in tests/e2e/test_crashes.py and tests/e2e/test_weather.py."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import KafkaConnectionError, ProducerFenced
from aiokafka.structs import TopicPartition

from tests.fakes.kafka import FakeProducer
from wakeline.transport.offsets import OffsetTracker
from wakeline.contract.topics import EVENTS, INBOX, TOOL_CALLS, TOOL_RESULTS
from wakeline_brain.writer import PartitionWriter, Record, WriterClosed

GROUP = "wakeline-brain"
INPUTS = [TopicPartition(INBOX, 3), TopicPartition(TOOL_RESULTS, 3)]


def make_writer(producer: FakeProducer, tracker: OffsetTracker, lost: list | None = None) -> PartitionWriter:
    return PartitionWriter(3, producer, GROUP, tracker, INPUTS,
                           on_lost=lambda writer, err: (lost if lost is not None else []).append((writer, err)))


def finished_inputs(tracker: OffsetTracker, inbox: list[int], results: list[int]) -> None:
    for tp, offsets in zip(INPUTS, (inbox, results)):
        for offset in offsets:
            tracker.add(tp, offset)
            tracker.finish(tp, offset)


async def eventually(condition, timeout_s: float = 3.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_appends_waiting_together_go_out_in_one_transaction_with_the_input_offsets():
    producer, tracker = FakeProducer(), OffsetTracker()
    finished_inputs(tracker, inbox=[7, 8], results=[2])
    writer = make_writer(producer, tracker)
    event = Record(EVENTS, b"s1", b'{"seq": 5}')
    call = Record(TOOL_CALLS, b"s1", b'{"tool_call_id": "tc-1"}')
    rerouted = Record(INBOX, b"s9", b'{"elsewhere": true}', partition=1)
    appends = [asyncio.create_task(writer.append(records)) for records in ([event, call], [rerouted])]
    await asyncio.sleep(0)  # both queued before the writer's loop takes its first batch
    await writer.start()
    try:
        await asyncio.wait_for(asyncio.gather(*appends), 3)
    finally:
        await writer.close()
    assert producer.started and producer.stopped
    [txn] = producer.transactions
    assert txn.outcome == "committed"
    assert [(s.topic, s.key, s.partition) for s in txn.sent] == [
        (EVENTS, b"s1", 3), (TOOL_CALLS, b"s1", 3), (INBOX, b"s9", 1)]
    assert txn.offsets == {INPUTS[0]: 9, INPUTS[1]: 3} and txn.group_id == GROUP
    assert tracker.to_commit(INPUTS) == {}  # marked committed only after the commit


async def test_offsets_that_moved_on_their_own_are_committed_without_records():
    producer, tracker = FakeProducer(), OffsetTracker()
    writer = make_writer(producer, tracker)
    await writer.start()
    try:
        finished_inputs(tracker, inbox=[0], results=[])
        await eventually(lambda: producer.committed)
    finally:
        await writer.close()
    [txn] = producer.committed
    assert txn.sent == [] and txn.offsets == {INPUTS[0]: 1}


@pytest.mark.parametrize("failure", [ProducerFenced(), KafkaConnectionError("broker went away")])
async def test_a_failed_transaction_fails_its_appends_and_hands_the_partition_back(failure):
    producer, tracker, lost = FakeProducer(), OffsetTracker(), []
    finished_inputs(tracker, inbox=[4], results=[])
    writer = make_writer(producer, tracker, lost)
    producer.fail_commit = failure
    await writer.start()
    try:
        with pytest.raises(WriterClosed):
            await asyncio.wait_for(writer.append([Record(EVENTS, b"s1", b"{}")]), 3)
        await eventually(lambda: lost)
        with pytest.raises(WriterClosed):  # a writer that lost its transaction takes nothing more
            await writer.append([Record(EVENTS, b"s1", b"{}")])
    finally:
        await writer.close()
    assert [t.outcome for t in producer.transactions] == ["aborted"]
    assert lost == [(writer, failure)]
    assert tracker.to_commit(INPUTS) == {INPUTS[0]: 5}  # still to commit: the next owner reads it again


async def test_a_writer_that_cannot_start_leaves_no_producer_behind():
    producer, tracker = FakeProducer(), OffsetTracker()
    producer.fail_start = ProducerFenced()
    writer = make_writer(producer, tracker)
    with pytest.raises(ProducerFenced):
        await writer.start()
    assert producer.stopped and producer.transactions == []


async def test_closing_fails_what_is_still_queued():
    producer, tracker = FakeProducer(), OffsetTracker()
    writer = make_writer(producer, tracker)
    pending = asyncio.create_task(writer.append([Record(EVENTS, b"s1", b"{}")]))
    await asyncio.sleep(0)
    await writer.close()  # never started: nothing was sent
    with pytest.raises(WriterClosed):
        await pending
    assert producer.transactions == [] and producer.stopped


async def test_a_busy_writer_commits_offsets_at_most_every_offsets_every_s_and_on_close():
    """Offsets cost a transaction two more requests: while records keep coming they ride
    in one transaction per `offsets_every_s`; the rest wait for a quiet moment or `close`."""
    producer, tracker = FakeProducer(), OffsetTracker()
    writer = PartitionWriter(3, producer, GROUP, tracker, INPUTS, offsets_every_s=60.0)
    await writer.start()
    try:
        finished_inputs(tracker, inbox=[0], results=[])
        await writer.append([Record(EVENTS, b"s1", b'{"seq": 1}')])
        finished_inputs(tracker, inbox=[1, 2], results=[0])
        await writer.append([Record(EVENTS, b"s1", b'{"seq": 2}')])
        assert tracker.to_commit(INPUTS) == {INPUTS[0]: 3, INPUTS[1]: 1}  # not yet: due in a minute
    finally:
        await writer.close()
    first, second, closing = producer.committed
    assert first.offsets == {INPUTS[0]: 1} and len(first.sent) == 1
    assert second.offsets in (None, {}) and len(second.sent) == 1
    assert closing.sent == [] and closing.offsets == {INPUTS[0]: 3, INPUTS[1]: 1}
    assert tracker.to_commit(INPUTS) == {}


async def test_a_writer_that_lost_its_producer_commits_nothing_on_close():
    producer, tracker, lost = FakeProducer(), OffsetTracker(), []
    writer = PartitionWriter(3, producer, GROUP, tracker, INPUTS, offsets_every_s=60.0,
                             on_lost=lambda w, err: lost.append(err))
    await writer.start()
    try:
        await writer.append([Record(EVENTS, b"s1", b"{}")])
        finished_inputs(tracker, inbox=[0], results=[])
        producer.fail_commit = ProducerFenced()
        with pytest.raises(WriterClosed):
            await writer.append([Record(EVENTS, b"s1", b"{}")])
        await eventually(lambda: lost)
    finally:
        await writer.close()
    assert [t.outcome for t in producer.transactions] == ["committed", "aborted"]
    assert tracker.to_commit(INPUTS) == {INPUTS[0]: 1}  # the next owner reads it again
