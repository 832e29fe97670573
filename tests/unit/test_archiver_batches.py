"""The archiver's batches on the in-memory store: what is stored, what is parked, what is
dead-lettered, and where the offsets go. `EventArchiver` as the service runs it, with a
`MemoryEventStore` where Postgres would be (the contract suite keeps the two alike)."""

from __future__ import annotations

from tests.factories import LIVE, draft, sealed
from tests.unit.session_log import Record
from wakeline.contract.codec import DeadLetter, encode
from wakeline.contract.events import Event
from wakeline.contract.topics import EVENTS
from wakeline.storage.event_store import ArchiveAt
from wakeline.storage.memory_store import MemoryEventStore
from wakeline_archiver.archiver import EventArchiver
from wakeline_archiver.quarantine import Quarantine
from wakeline_archiver.triage import HELD

GROUP = "test-archiver"


class Archiver:
    def __init__(self) -> None:
        self.store = MemoryEventStore()
        self.letters: list[DeadLetter] = []
        self.offset = 0

        async def send(letter: DeadLetter, key: bytes | None, partition: int) -> None:
            self.letters.append(letter)
        self.archiver = EventArchiver(self.store, GROUP, Quarantine(self.store, GROUP), send)

    def records(self, *values: tuple[str, bytes]) -> list[Record]:
        """Records of partition 0 at the next offsets, from (session id, value) pairs."""
        out = []
        for sid, value in values:
            out.append(Record(EVENTS, 0, self.offset, sid.encode(), value))
            self.offset += 1
        return out

    async def archive(self, *events: Event, raw: tuple[str, bytes] | None = None) -> list[Record]:
        records = self.records(*((e.session_id, encode(e)) for e in events), *([raw] if raw else []))
        await self.archiver.archive(records)
        return records

    async def offset_stored(self) -> int | None:
        return (await self.store.archived_offsets(GROUP, [EVENTS])).get((EVENTS, 0))


def session(turns: int, tenant: str = "tenant-a") -> list[Event]:
    log = sealed([draft("session_created", "cmd-create", config={}, owner="user:ann")], tenant=tenant, stamps=LIVE)
    for turn in range(turns):
        log += sealed([draft("user_message", f"cmd-{turn}", text=f"m{turn}")], log[0].session_id, tenant=tenant,
                      after=log[-1], stamps=LIVE)
    return log


async def test_a_clean_batch_is_stored_with_its_sessions_rows_and_the_offset_past_it() -> None:
    a = Archiver()
    one, two = session(2), session(1)
    await a.archive(*one, *two)
    assert (a.archiver.archived, a.archiver.redelivered, a.letters) == (5, 0, [])
    assert await a.offset_stored() == 5
    assert {sid: row.last_seq for sid, row in a.store.sessions.items()} == {one[0].session_id: 3,
                                                                           two[0].session_id: 2}
    await a.archive(*one)  # redelivered after a crash: a no-op, and the offset still moves
    assert (a.archiver.archived, a.archiver.redelivered) == (5, 3)
    assert await a.offset_stored() == 8


async def test_a_conflicting_event_parks_its_session_and_holds_what_follows_while_the_others_are_stored() -> None:
    a = Archiver()
    bad, bystander = session(3), session(1)
    await a.archive(*bad[:2])
    impostor = sealed([draft("user_message", "cmd-x", text="another history")], bad[0].session_id,
                      tenant=bad[0].tenant, after=bad[0], stamps=LIVE)
    await a.archive(*impostor, *bad[2:], *bystander)
    sid = bad[0].session_id
    assert a.store.sessions[sid].last_seq == 2 and a.store.sessions[bystander[0].session_id].last_seq == 2
    [parked] = await a.store.parked([(bad[0].tenant, sid)])
    assert parked.from_seq == 2 and "conflicting event" in parked.reason
    reasons = [letter.reason for letter in a.letters]
    assert "conflicting event" in reasons[0] and all(r.startswith(HELD) for r in reasons[1:]) and len(reasons) == 3
    assert await a.offset_stored() == a.offset  # past the whole batch: nothing is read twice
    read = await a.store.wake_read(sid, bad[0].tenant, ArchiveAt(GROUP, EVENTS, 0))
    assert read.parked is not None and read.parked.from_seq == 2  # and the brain will not wake it short
    await a.archive(*sealed([draft("user_message", "cmd-y", text="later")], sid, tenant=bad[0].tenant,
                            after=bad[-1], stamps=LIVE))
    assert a.letters[-1].reason.startswith(HELD) and a.store.sessions[sid].last_seq == 2


async def test_an_unreadable_record_is_dead_lettered_and_parks_the_session_it_names() -> None:
    a = Archiver()
    log = session(2)
    await a.archive(*log[:2])
    unreadable = encode(log[2])[:-10]  # cut short: not JSON
    claimed = b'{"tenant": "%s", "session_id": "%s", "seq": 3, "type": 7}' % (
        log[0].tenant.encode(), log[0].session_id.encode())
    await a.archive(raw=(log[0].session_id, unreadable))
    await a.archive(raw=(log[0].session_id, claimed))
    assert len(a.letters) == 2 and a.archiver.archived == 2
    [parked] = await a.store.parked([(log[0].tenant, log[0].session_id)])
    assert parked.from_seq == 3
    assert await a.offset_stored() == 4
