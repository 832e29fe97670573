"""A wake skips its tail read only where that read would find nothing (own_writes.py), on the
real broker: a previous owner's producer writes a session, the brain's writer (the same
transactional id, so it fences it) writes another, and for every archive position the rule
could be asked at, a skip is never claimed where a real read-committed tail read finds the
session's events."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka.structs import TopicPartition

from runner_harness import reachable_kafka
from test_brain_tail_reads import committed_through, private_topic, sessions_on
from tests.factories import LIVE, draft, sealed
from wakeline.contract.codec import encode
from wakeline.transport.kafka_io import make_producer
from wakeline.transport.offsets import OffsetTracker
from wakeline_brain.tail_reads import TailReader
from wakeline_brain.writer import PartitionWriter, Record

pytestmark = pytest.mark.kafka


def records_of(sid: str) -> list[bytes]:
    return [encode(e) for e in sealed([draft("session_created", f"c-{sid}", config={}, owner="user:t"),
                                       draft("user_message", f"m-{sid}", text=f"hello {sid}")], sid, stamps=LIVE)]


async def test_a_skipped_tail_is_one_a_real_read_finds_empty_and_a_previous_owners_records_are_read() -> None:
    settings = await reachable_kafka()
    async with private_topic() as (topic, _, tail):
        before, ours, never = sessions_on(0, 3)
        tp = TopicPartition(topic, 0)
        transactional_id = f"test-own-{uuid.uuid4().hex}"
        previous = make_producer(settings, transactional_id=transactional_id)
        await previous.start()
        try:
            async with previous.transaction():
                for value in records_of(before):
                    await previous.send(topic, value, key=before.encode(), partition=0)
        finally:
            await previous.stop()
        # The brain's writer of p0: the same transactional id fences whatever the previous one left open.
        writer = PartitionWriter(0, make_producer(settings, transactional_id=transactional_id), "test-own",
                                 OffsetTracker(), [], events_topic=topic)
        await writer.start()
        try:
            await asyncio.wait_for(writer.append([Record(topic, ours.encode(), v) for v in records_of(ours)]), 10)
        finally:
            await writer.close()
        end = (await tail.end_offsets([tp]))[tp]
        await committed_through(tail, tp, end)
        reader = TailReader(tail, topic=topic)
        skipped = []
        for start in range(end + 1):
            for sid in (before, ours, never):
                if writer.own.untouched(sid.encode(), start):
                    skipped.append((sid, start))
                    assert await reader.read(sid, 0, start) == [], f"{sid} has events from offset {start} on"
    first_own = min(start for sid, start in skipped)
    assert first_own >= 3, "the previous owner's two records and their commit marker come before ours"
    assert (never, first_own) in skipped and (before, first_own) in skipped, "the rule did skip where it may"
    assert all(start >= first_own for _, start in skipped)
    assert not [s for s in skipped if s[0] == ours], "a session the writer wrote is always read"
