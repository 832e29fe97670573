"""The archive and the Kafka tail of a `FakeProducer`'s events, for the brain's wakes in unit tests.

A brain wakes a session through `wakeline_brain.wake.SessionLoader`: the archived part from
an `EventStore`, the rest from the events partition's tail. `ArchiveOf` gives a test both
over what a fake producer committed: a `MemoryEventStore` the test fills as the archiver
would (`archive`, up to an offset, with the offsets it reached), and a tail reader over the
committed records (offsets count a partition's committed events records in commit order).
So the loader's own rules (newest snapshot on, archive then tail, owner from the log, a
fork's prefix) run in the unit tests, not a copy of them.
"""

from __future__ import annotations

from wakeline.contract.events import Event, parse_event
from wakeline.contract.topics import EVENTS
from wakeline.storage.memory_store import MemoryEventStore
from wakeline_brain.wake import SessionLoader

from tests.fakes.kafka import FakeProducer

GROUP = "test-archiver"


class ArchiveOf:
    def __init__(self, producer: FakeProducer, partition: int = 0):
        self.producer, self.partition = producer, partition
        self.store = MemoryEventStore()
        self.tail_reads: list[tuple[str, int]] = []  # (session, start offset) of every tail read

    def records(self) -> list[tuple[bytes | None, Event]]:
        """The partition's committed events records, in offset order."""
        return [(s.key, parse_event(s.value)) for t in self.producer.committed for s in t.sent
                if s.topic == EVENTS and (s.partition or 0) == self.partition]

    async def archive(self, upto: int | None = None) -> int:
        """Archives the records up to `upto` (all of them: None) as the archiver would; the offset reached."""
        records = self.records()
        upto = len(records) if upto is None else upto
        start = (await self.store.archived_offsets(GROUP, [EVENTS])).get((EVENTS, self.partition), 0)
        await self.store.archive(GROUP, [e for _, e in records[start:upto]], {(EVENTS, self.partition): upto})
        return upto

    async def read(self, session_id: str, partition: int, start: int) -> list[Event]:
        """The tail: the session's committed records from `start` on (`wake.Tails`)."""
        assert partition == self.partition
        self.tail_reads.append((session_id, start))
        return [e for key, e in self.records()[start:] if key == session_id.encode()]

    def loader(self) -> SessionLoader:
        return SessionLoader(self.store, self, GROUP, EVENTS)
