"""Concurrent wakes on one partition share tail reads, and each still gets exactly its own
events: on the real broker, with transactional writes as the brain makes them. And a wake skips
its tail read only where that read would find nothing (own_writes.py): a previous owner's
producer writes a session, the brain's writer (the same transactional id, so it fences it)
writes another, and for every archive position the rule could be asked at, a skip is never
claimed where a real read-committed tail read finds the session's events."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import NewTopic
from aiokafka.structs import TopicPartition

from runner_harness import reachable_kafka
from tests.factories import LIVE, draft, sealed
from wakeline.contract.codec import encode
from wakeline.transport.kafka_io import make_admin, make_producer
from wakeline.contract.topics import partition_for
from wakeline.transport.offsets import OffsetTracker
from wakeline_brain.writer import PartitionWriter, Record
from wakeline_brain.tail_reads import TailReader, tail_consumer

pytestmark = pytest.mark.kafka
PARTITIONS = 2
LONG_POLL_MS = 30_000  # under the client's 40 s request timeout
LOOK_UP_BOUND_S = 10.0  # a round trip is milliseconds; behind the poll it is 30 s


def sessions_on(partition: int, count: int) -> list[str]:
    found: list[str] = []
    while len(found) < count:
        sid = f"tail-{uuid.uuid4().hex[:12]}"
        if partition_for(sid, PARTITIONS) == partition:
            found.append(sid)
    return found


@asynccontextmanager
async def private_topic(**tail_options: int) -> AsyncIterator[tuple[str, AIOKafkaProducer, AIOKafkaConsumer]]:
    """A topic of its own on the real broker, a transactional producer and a started tail consumer."""
    settings = await reachable_kafka()
    topic = f"test-tail-{uuid.uuid4().hex[:12]}"
    admin = make_admin(settings)
    await admin.start()
    await admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    producer = make_producer(settings, transactional_id=f"test-tail-{uuid.uuid4().hex}")
    tail = tail_consumer(settings, **tail_options)
    await producer.start()
    await tail.start()
    try:
        yield topic, producer, tail
    finally:
        await tail.stop()
        await producer.stop()
        await admin.delete_topics([topic])
        await admin.close()


async def committed_through(tail: AIOKafkaConsumer, tp: TopicPartition, end: int) -> None:
    """Waits for the read-committed end to reach `end`. A commit returns once the coordinator
    has logged it; the markers reach the partitions a moment later, and until then a tail
    read ends before the transaction (the brain's own wakes are safe: a new owner's
    `init_transactions` waits for its predecessor's markers)."""
    async with asyncio.timeout(10):
        while (await tail.end_offsets([tp]))[tp] < end:
            await asyncio.sleep(0.01)


async def test_twenty_concurrent_wakes_of_a_partition_take_two_reads_and_get_only_their_own_events() -> None:
    async with private_topic() as (topic, producer, tail):
        sids = sessions_on(0, 20)
        logs = {sid: sealed([draft("session_created", f"c-{sid}", config={}, owner="user:t"),
                             draft("user_message", f"m-{sid}", text=f"hello {sid}")], sid, stamps=LIVE)
                for sid in sids}
        other = sessions_on(1, 1)[0]  # the other partition: never read for these wakes
        async with producer.transaction():
            for sid, events in logs.items():
                for event in events:
                    await producer.send(topic, encode(event), key=sid.encode(), partition=0)
            await producer.send(topic, encode(logs[sids[0]][0]), key=other.encode(), partition=1)
        await committed_through(tail, TopicPartition(topic, 0), 2 * len(sids) + 1)

        loader = TailReader(tail, topic=topic)
        reads: list[tuple[int, int]] = []
        read_keys = loader._read_keys

        async def counted(partition: int, start: int, keys: set[bytes]):
            reads.append((partition, len(keys)))
            return await read_keys(partition, start, keys)
        loader._read_keys = counted  # type: ignore[method-assign]

        found = await asyncio.wait_for(asyncio.gather(*(loader.read(sid, 0, 0) for sid in sids)), 60)
    # The first wake reads alone; everything that queued behind it is served by one read.
    assert reads == [(0, 1), (0, 19)]
    for sid, events in zip(sids, found):
        assert [(e.session_id, e.seq, e.event_id) for e in events] == \
            [(e.session_id, e.seq, e.event_id) for e in logs[sid]], sid


async def test_a_tail_read_leaves_no_long_poll_in_front_of_the_next_wakes_offset_look_up() -> None:
    """Kafka answers a connection's requests in order. A fetch the consumer sends from the
    end after the last records is a long poll, and the next wake's `end_offsets` on the
    same connection waits the whole of it. With the wait made 30 s here, a read that leaves
    one behind holds each following look-up for 30 s; one that does not, for a round trip.
    The bound (10 s) is a hang bound, not a speed: what a look-up costs is `make bench`'s
    `tail_lookup_ms`."""
    async with private_topic(fetch_max_wait_ms=LONG_POLL_MS) as (topic, producer, tail):
        sid = sessions_on(0, 1)[0]
        events = sealed([draft("session_created", f"c-{sid}", config={}, owner="user:t"),
                         draft("user_message", f"m-{sid}", text="hello")], sid, stamps=LIVE)
        for event in events:  # two transactions: the tail ends on a commit marker
            async with producer.transaction():
                await producer.send(topic, encode(event), key=sid.encode(), partition=0)
        tp = TopicPartition(topic, 0)
        await committed_through(tail, tp, 4)  # two records, two markers
        loader = TailReader(tail, topic=topic)
        for read in range(3):
            found = await asyncio.wait_for(loader._read_keys(0, 0, {sid.encode()}), 60)
            assert [e.seq for e in found[sid.encode()]] == [1, 2]
            try:
                await asyncio.wait_for(tail.end_offsets([tp]), LOOK_UP_BOUND_S)
            except TimeoutError:
                pytest.fail(f"the offset look-up after tail read {read + 1} waited over {LOOK_UP_BOUND_S} s:"
                            f" behind a long poll of up to {LONG_POLL_MS / 1000:g} s")


async def test_a_tail_that_ends_in_an_aborted_transaction_is_read_to_its_end_without_its_records() -> None:
    """After a fence (a brain killed mid-transaction, its successor aborting it) a
    partition's tail can hold nothing but aborted records and their marker. The fetch
    moves the position to the end yet hands back no record: the read must end on the
    position, never wait for a record (it would wait until its deadline, and fail). That
    it costs one short poll (`RANGE_POLL_MS`), not a long one, is `make bench`'s
    `aborted_tail_read_ms` beside a committed tail's read."""
    async with private_topic() as (topic, producer, tail):
        sid = sessions_on(0, 1)[0]
        created, message = sealed([draft("session_created", f"c-{sid}", config={}, owner="user:t"),
                                   draft("user_message", f"m-{sid}", text="hello")], sid, stamps=LIVE)
        async with producer.transaction():
            await producer.send(topic, encode(created), key=sid.encode(), partition=0)
        await committed_through(tail, TopicPartition(topic, 0), 2)
        committed_end = (await tail.end_offsets([TopicPartition(topic, 0)]))[TopicPartition(topic, 0)]
        await producer.begin_transaction()
        await producer.send(topic, encode(message), key=sid.encode(), partition=0)
        await producer.abort_transaction()
        loader = TailReader(tail, topic=topic)
        for start in (0, committed_end, committed_end):
            found = await asyncio.wait_for(loader._read_keys(0, start, {sid.encode()}), 60)
            # the aborted message is never handed back; the committed event only when read from 0
            assert [e.seq for e in found.get(sid.encode(), [])] == ([1] if start == 0 else [])


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
