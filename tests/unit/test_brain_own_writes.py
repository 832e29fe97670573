"""`OwnWrites` (own_writes.py): a wake skips its tail read only where the partition's writer
knows the whole tail is its own records and none of them the session's. The same rule on the
real broker, against a real tail read: tests/integration/test_brain_tail_reads.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiokafka.structs import TopicPartition

from tests.fakes.archive import GROUP, ArchiveOf
from tests.fakes.kafka import FakeProducer
from tests.factories import LIVE, draft, sealed
from wakeline.contract.codec import encode
from wakeline.contract.topics import EVENTS, INBOX, TOOL_CALLS, TOOL_RESULTS
from wakeline.transport.offsets import OffsetTracker
from wakeline_brain.own_writes import OwnWrites
from wakeline_brain.wake import SessionLoader
from wakeline_brain.writer import PartitionWriter, Record


@dataclass(frozen=True)
class Delivered:
    offset: int


def delivered(offset: int) -> asyncio.Future[Any]:
    done = asyncio.get_running_loop().create_future()
    done.set_result(Delivered(offset))
    return done


async def settled() -> None:
    await asyncio.sleep(0)  # a done future's callbacks run on the loop's next turn


async def test_nothing_is_skipped_until_the_broker_has_given_the_first_records_offset() -> None:
    own = OwnWrites()
    assert not own.untouched(b"other", 0)
    first: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    own.sent(b"ours", first)
    own.sent(b"ours-too", delivered(41))  # later records tell nothing: the first one's offset is the bound
    await settled()
    assert not own.untouched(b"other", 10**9)
    first.set_result(Delivered(40))
    await settled()
    assert own.untouched(b"other", 40) and own.untouched(b"other", 1000)
    assert not own.untouched(b"other", 39), "before our first record another writer's may be there"
    assert not own.untouched(b"ours", 40) and not own.untouched(b"ours-too", 40)


async def test_a_first_send_that_failed_or_a_fake_without_an_offset_never_skips() -> None:
    failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    failed.set_exception(RuntimeError("the transaction was fenced"))
    own = OwnWrites()
    own.sent(b"a", failed)
    other = OwnWrites()
    other.sent(b"a", None)  # a producer that gives no delivery future
    await settled()
    assert not own.untouched(b"b", 10**9) and not other.untouched(b"b", 10**9)
    failed.exception()  # retrieved: no "never retrieved" warning


async def test_generations_bound_the_keys_kept_and_move_the_bound_up_to_the_oldest_kept() -> None:
    own = OwnWrites(generation_keys=2)
    for offset, key in enumerate([b"a", b"b", b"c", b"d", b"e"], start=10):
        own.sent(key, delivered(offset))  # a, b | c, d | e: the first generation is dropped at e
    own.sent(b"e", delivered(15))  # a key already in the newest generation opens no new one
    await settled()
    assert not own.untouched(b"x", 11), "a and b's generation is gone: from 11 on is no longer known"
    assert own.untouched(b"x", 12)
    assert own.untouched(b"a", 12), "a's records are before 12, all archived once the archive stands there"
    assert not own.untouched(b"c", 12) and not own.untouched(b"e", 12)


class OffsetProducer(FakeProducer):
    """A `FakeProducer` whose sends are delivered with the offset they would have in their partition."""

    def __init__(self) -> None:
        super().__init__()
        self.next_offset: dict[tuple[str, int | None], int] = {}

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   partition: int | None = None, headers: list | None = None) -> asyncio.Future:
        await super().send(topic, value, key, partition, headers)
        offset = self.next_offset.get((topic, partition), 100)
        self.next_offset[(topic, partition)] = offset + 1
        return delivered(offset)


async def test_the_writer_keeps_the_sessions_of_its_own_events_records_only() -> None:
    producer = OffsetProducer()
    writer = PartitionWriter(3, producer, "wakeline-brain", OffsetTracker(),
                             [TopicPartition(INBOX, 3), TopicPartition(TOOL_RESULTS, 3)])
    await writer.start()
    try:
        await asyncio.wait_for(writer.append([Record(EVENTS, b"s1", b"{}"), Record(TOOL_CALLS, b"s2", b"{}"),
                                              Record(INBOX, b"s9", b"{}", partition=1)]), 3)
    finally:
        await writer.close()
    await settled()
    assert not writer.own.untouched(b"s1", 100)
    assert writer.own.untouched(b"s2", 100), "a tool call is not an event of the partition"
    assert writer.own.untouched(b"s9", 100), "a record re-routed to another partition is not ours here"
    assert not writer.own.untouched(b"s1", 99)


async def test_the_loader_skips_the_tail_read_only_for_a_session_the_writer_did_not_write() -> None:
    producer = FakeProducer()
    async with producer.transaction():
        for event in sealed([draft("session_created", "c-1", config={}, owner="user:t"),
                             draft("user_message", "m-1", text="hi")], "s-known", tenant="t", stamps=LIVE):
            await producer.send(EVENTS, encode(event), key=b"s-known", partition=0)
    archive = ArchiveOf(producer)
    own = OwnWrites()
    own.sent(b"s-known", delivered(0))  # the writer wrote s-known's records, from offset 0
    await settled()
    loader = SessionLoader(archive.store, archive, GROUP, EVENTS, own=lambda partition: own)
    assert await loader.load("s-new", "t", 0) == []
    assert archive.tail_reads == [], "a session the writer never wrote: nothing to read"
    assert [e.seq for e in await loader.load("s-known", "t", 0)] == [1, 2]
    assert archive.tail_reads == [("s-known", 0)]
    no_writer = SessionLoader(archive.store, archive, GROUP, EVENTS, own=lambda partition: None)
    assert await no_writer.load("s-new", "t", 0) == []
    assert archive.tail_reads[-1] == ("s-new", 0), "no writer of ours on the partition: read as before"
