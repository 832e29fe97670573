"""Where a brain partition's writer ends: no record is committed past before its dead letter,
and a writer always closes.

The real `Brain` router and `PartitionWriter` over the in-memory producer. A dead-lettered
record's letter and the offset past it must leave in one transaction, or the offset not at
all, whatever happens to the partition's writer in between (the group moves the partition,
the brain stops). Were the offset released first, a transaction could commit past the record
while the letter still waited in the writer's queue, and a writer closed then would drop the
letter for good.
"""

from __future__ import annotations

import asyncio
import uuid

from aiokafka.structs import ConsumerRecord, TopicPartition

from tests.fakes.kafka import FakeProducer
from wakeline.contract import commands as c, topics
from wakeline.contract.codec import encode
from wakeline_brain.router import Brain
from wakeline_brain.settings import BrainSettings
from wakeline_brain.writer import PartitionWriter

OFFSET = 41


async def _taken(value_for) -> tuple[Brain, PartitionWriter, FakeProducer, int]:
    """A brain owning one partition whose writer has taken one record, built by `value_for(session, settings)`."""
    settings = BrainSettings()
    producer = FakeProducer()
    brain = Brain(settings, load=None, model_for=None, tools=[], new_producer=lambda p: producer)
    session = str(uuid.uuid4())
    partition = (topics.partition_for(session, settings.partitions) + 1) % settings.partitions  # the wrong one
    inputs = [TopicPartition(t, partition) for t in (topics.INBOX, topics.TOOL_RESULTS)]
    writer = PartitionWriter(partition, producer, settings.group_id, brain.tracker, inputs, offsets_every_s=0)
    await writer.start()
    brain.writers[partition] = writer
    value = value_for(session, settings)
    brain.dispatch(ConsumerRecord(topics.INBOX, partition, OFFSET, 0, 0, topics.record_key(session), value, None, 0,
                                  len(value), []))
    return brain, writer, producer, partition


def _oversized(session: str, settings: BrainSettings) -> bytes:
    # Too large to re-route to its own partition: the brain dead-letters it as too_large.
    return encode(c.PostMessage(command_id=str(uuid.uuid4()), session_id=session,
                                text="é" * (settings.max_record_bytes // 2 + 4000)))


def _garbage(session: str, settings: BrainSettings) -> bytes:
    return b"\xff not a command"


def _first(producer: FakeProducer, holds) -> int | None:
    """The index among committed transactions of the first one for which `holds(t)`."""
    return next((i for i, t in enumerate(producer.committed) if holds(t)), None)


def _letter(t) -> bool:
    return any(s.topic == topics.DEAD_LETTER for s in t.sent)


def _past_record(partition: int):
    return lambda t: t.offsets.get(TopicPartition(topics.INBOX, partition), -1) > OFFSET


async def _until(condition, timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)


async def test_a_letter_is_committed_no_later_than_the_offset_past_its_record() -> None:
    for value_for in (_oversized, _garbage):
        _, writer, producer, partition = await _taken(value_for)
        await _until(lambda: _first(producer, _past_record(partition)) is not None)
        await writer.close()

        letter, past = _first(producer, _letter), _first(producer, _past_record(partition))
        assert letter is not None and past is not None and letter <= past, value_for.__name__
        assert sum(_letter(t) for t in producer.committed) == 1


async def test_a_writer_closed_before_the_letter_is_written_does_not_commit_past_its_record() -> None:
    for value_for in (_oversized, _garbage):
        _, writer, producer, partition = await _taken(value_for)
        await writer.close()  # at once, before the letter's write ran: the partition moved, or the brain stops
        await asyncio.sleep(0.1)

        assert _first(producer, _letter) is None, value_for.__name__  # dropped with the writer...
        assert _first(producer, _past_record(partition)) is None, value_for.__name__  # ...so read again


async def test_a_writer_closed_as_its_queue_hands_it_a_batch_still_closes() -> None:
    # Python 3.11's wait_for swallowed the cancel when the get it waited on completed in the
    # same turn of the loop: the writer then went on looping and close() never returned.
    settings = BrainSettings()
    producer = FakeProducer()
    writer = PartitionWriter(0, producer, settings.group_id, Brain(settings, load=None, model_for=None, tools=[],
                             new_producer=lambda p: producer).tracker, [], offsets_every_s=0)
    await writer.start()
    await asyncio.sleep(0.05)  # the loop waits on its queue
    done = asyncio.get_running_loop().create_future()
    writer._queue.put_nowait(([], done))  # the get completes in the very turn the cancel arrives
    async with asyncio.timeout(5):
        await writer.close()
