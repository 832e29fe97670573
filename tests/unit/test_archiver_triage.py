"""Sorting a batch: what is stored, what is set aside, which sessions a batch parks."""

from __future__ import annotations

import json
from tests.factories import draft, sealed
from tests.unit.session_log import Record, created
from wakeline.contract.codec import encode
from wakeline_archiver.quarantine import Parked
from wakeline_archiver.records import SessionKey
from wakeline_archiver.triage import decode_all, sessions_named, triage

UUIDS = [f"3f1c9b2e-8a51-4c1e-9d0f-{n:012d}" for n in range(100)]


def records(session_id: str, first_offset: int, count: int = 4) -> list[Record]:
    events = sealed([created()] + [draft("user_message", text=str(n)) for n in range(count - 1)], session_id)
    return [Record("events", 0, first_offset + i, session_id.encode(),
                   encode(e.model_copy(update={"event_id": UUIDS[first_offset + i]})))
            for i, e in enumerate(events)]


def spoiled(record: Record, **changes) -> Record:
    body = json.loads(record.value) | changes
    return Record(record.topic, record.partition, record.offset, record.key, json.dumps(body).encode())


def test_an_unreadable_event_parks_its_session_from_its_seq_and_holds_what_follows() -> None:
    good, bad = records("sess-good", 0), records("sess-bad", 10)
    bad[1] = spoiled(bad[1], actor="user:" + "x" * 5000)
    result = triage(decode_all(good + bad), {})
    assert [e.session_id for _, e in result.to_store] == ["sess-good"] * 4 + ["sess-bad"]
    assert [a.record.offset for a in result.set_aside] == [11, 12, 13]
    assert [p.from_seq for p in result.parked] == [2]
    assert result.set_aside[2].reason.startswith("session parked from seq 2: ")


def test_a_parked_session_keeps_redeliveries_before_its_seq_and_holds_the_rest() -> None:
    batch = records("sess-1", 0)
    key = SessionKey("tenant-a", "sess-1")
    parked = {key: Parked(key, 3, "conflicting event", "events", 0, 2)}
    assert sessions_named(decode_all(batch)) == {key}
    result = triage(decode_all(batch), parked)
    assert [e.seq for _, e in result.to_store] == [1, 2]
    assert [a.record.offset for a in result.set_aside] == [2, 3] and result.parked == []


def test_garbage_without_a_plain_session_is_set_aside_and_parks_nothing() -> None:
    result = triage(decode_all([Record("events", 0, 5, b"k", b"\x00garbage")]), {})
    assert len(result.set_aside) == 1 and result.parked == [] and result.to_store == []
