"""The archiver's pure pieces: rows, the sessions projection, redelivery versus conflict, dead-letter rows."""

from __future__ import annotations

import pytest

from tests.factories import draft, sealed
from tests.unit.session_log import Record, created
from wakeline.contract.codec import DeadLetter, MalformedRecord, encode
from wakeline.storage.event_rows import EVENT_COLUMNS, event_row
from wakeline.log.fold import fold
from wakeline.log.status import SessionRow, advance
from wakeline.storage.archive_rules import (
    BrokenChain, ConflictingEvent, check_skipped, project_sessions, runs_to_look_up, select_new,
)
from wakeline_archiver.dead_letters import UNPARSEABLE, letter_row
from wakeline_archiver.records import decode_event
from wakeline_archiver.offsets import next_offsets


def log():
    return sealed([created(), draft("user_message", text="hi"), draft("turn_started", turn=1),
                   draft("tool_call", tool_call_id="c1", name="bash", input={"cmd": "ls"}),
                   draft("tool_result", tool_call_id="c1", name="bash", output="x", is_error=True),
                   draft("turn_ended", turn=1), draft("session_ended", reason="completed"),
                   draft("title_generated", title="t"), draft("deleted", by="user:bob")], "sess-1")


def test_event_row_derives_tool_name_and_is_error_only_for_tool_events() -> None:
    rows = [dict(zip(EVENT_COLUMNS, event_row(e))) for e in log()]
    assert [(r["type"], r["tool_name"], r["is_error"]) for r in rows if r["tool_name"] or r["is_error"] is not None] \
        == [("tool_call", "bash", None), ("tool_result", "bash", True)]
    assert rows[1]["payload"] == '{"text":"hi","queued":false}'


def test_session_row_opens_idle_with_owner_model_and_fork_point() -> None:
    first = log()[0]
    row = advance(None, first)
    assert (row.tenant, row.session_id, row.owner, row.title, row.model, row.status, row.last_seq, row.last_hash) \
        == ("tenant-a", "sess-1", "user:alice", None, "scripted:default", "idle", 1, first.hash)
    assert (row.created_at, row.updated_at, row.parent_session_id, row.fork_seq) == (first.ts, first.ts, None, None)


def test_the_row_moves_in_the_folds_terms() -> None:
    events, row, statuses = log(), None, []
    for n, event in enumerate(events, 1):
        row = advance(row, event)
        state = fold(events[:n])
        assert (row.status, row.last_seq, row.last_hash, row.title, row.ended_reason, row.deleted_by) \
            == (state.status, state.last_seq, state.last_hash, state.title, state.ended_reason, state.deleted_by)
        assert row.updated_at == event.ts
        statuses.append(row.status)
    assert statuses == ["idle", "idle", "running", "running", "running", "idle", "ended", "ended", "deleted"]
    assert (row.title, row.ended_reason, row.deleted_by, row.deleted_at) == \
        ("t", "completed", "user:bob", events[-1].ts)
    assert row.created_at == events[0].ts


def test_projection_moves_each_session_forward_only_and_returns_the_rows_that_moved() -> None:
    events, other = log(), sealed([created(), draft("user_message", text="hi")], "sess-2")
    at_three = advance(advance(advance(None, events[0]), events[1]), events[2])
    stale = SessionRow(**{**at_three.__dict__, "session_id": "sess-3"})
    rows = project_sessions({"sess-1": at_three, "sess-3": stale}, events + other)
    assert [(r.session_id, r.last_seq, r.status) for r in rows] == [("sess-1", 9, "deleted"), ("sess-2", 2, "idle")]
    assert project_sessions({"sess-1": rows[0]}, events) == []  # a redelivered batch regresses nothing


def test_projection_opens_no_row_without_its_session_created() -> None:
    assert project_sessions({}, log()[1:]) == []


def test_next_offsets_is_one_past_the_highest_per_topic_partition() -> None:
    positions = [("e", 0, 4), ("e", 0, 9), ("e", 1, 0), ("d", 0, 2)]
    assert next_offsets(positions) == {("e", 0): 10, ("e", 1): 1, ("d", 0): 3}


def test_select_new_skips_redeliveries_and_duplicates_within_the_batch() -> None:
    events = log()
    stored = {(e.session_id, e.seq): e.hash for e in events[:3]}
    assert select_new(events + events[5:], stored) == events[3:]


def test_select_new_raises_on_a_second_history_for_a_stored_position() -> None:
    events, other = log(), sealed([created(), draft("user_message", text="other")], "sess-1")
    with pytest.raises(ConflictingEvent) as raised:
        select_new([other[1]], {(e.session_id, e.seq): e.hash for e in events})
    conflict = raised.value
    assert (conflict.seq, conflict.stored_hash, conflict.incoming_hash) == (2, events[1].hash, other[1].hash)
    assert "sess-1" in str(raised.value) and events[1].hash in str(raised.value)
    with pytest.raises(ConflictingEvent):
        select_new([events[0], events[1], other[1]], {})  # within one batch too


def test_select_new_requires_each_new_event_to_continue_the_archived_chain() -> None:
    events, other = log(), sealed([created(), draft("user_message", text="other")], "sess-1")
    assert select_new(events[:1], {}) == events[:1]  # seq 1 links to the genesis hash
    assert select_new(events[3:5], {("sess-1", 3): events[2].hash}) == events[3:5]
    with pytest.raises(BrokenChain, match="seq 2 is not archived"):
        select_new(events[2:4], {})  # a gap
    with pytest.raises(BrokenChain, match=f"archived with hash {other[1].hash}"):
        select_new(events[2:3], {("sess-1", 2): other[1].hash})  # a fork


def test_runs_to_look_up_cover_the_events_and_their_predecessors_one_run_per_consecutive_seqs() -> None:
    events = log()
    assert runs_to_look_up(events[:2]) == [("sess-1", 1, 2)]
    assert runs_to_look_up(events[4:6]) == [("sess-1", 4, 6)]
    # a gap starts a new run at its predecessor, so a stray far seq never widens a run
    assert runs_to_look_up([events[5], events[1], events[2]]) == [("sess-1", 1, 3), ("sess-1", 5, 6)]


def test_check_skipped_accepts_only_identical_concurrent_writes() -> None:
    events = log()
    check_skipped(events[:2], {(e.session_id, e.seq): e.hash for e in events})
    with pytest.raises(ConflictingEvent):
        check_skipped(events[:2], {})


def test_decode_event_refuses_what_the_archive_cannot_hold() -> None:
    event = log()[0].model_copy(update={"event_id": "3f1c9b2e-8a51-4c1e-9d0f-6b2a7e4c5d10"})
    assert decode_event(encode(event)) == event
    with pytest.raises(MalformedRecord, match="event_id: not a UUID"):
        decode_event(encode(log()[0]))  # the unit logs' ids are readable names, not UUIDs
    with pytest.raises(MalformedRecord):
        decode_event(b'{"type": "nope"}')
    with pytest.raises(MalformedRecord, match="tombstone"):
        decode_event(None)


def test_letter_row_keeps_the_reported_source_and_its_own_position() -> None:
    letter = DeadLetter(topic="wakeline.inbox", partition=1, offset=-1, key="k", value="v\x00w", reason="bad",
                        service="brain")
    row = letter_row(Record("wakeline.dead-letter", 4, 17, b"k", encode(letter)))
    assert row == ("wakeline.inbox", 1, -1, "k", "v\\x00w", "bad", "brain", "wakeline.dead-letter", 4, 17)


def test_unparseable_letter_is_kept_with_its_own_position_as_the_source() -> None:
    row = letter_row(Record("wakeline.dead-letter", 2, 5, None, b"\xffnot json"))
    assert row[:4] == ("wakeline.dead-letter", 2, 5, None)
    assert row[4] == "\ufffdnot json" and row[5].startswith(f"{UNPARSEABLE}: ")
    assert row[6:] == ("archiver", "wakeline.dead-letter", 2, 5)


def test_a_letter_that_would_not_fit_its_columns_is_kept_as_unparseable_or_cut_to_fit() -> None:
    huge = DeadLetter(topic="t", partition=2**40, offset=0, key=None, value="v", reason="r", service="s")
    row = letter_row(Record("wakeline.dead-letter", 3, 9, None, encode(huge)))
    assert row[:3] == ("wakeline.dead-letter", 3, 9) and "position out of range" in row[5]
    long_names = DeadLetter(topic="t" * 5000, partition=1, offset=2, key=None, value="v", reason="r",
                            service="s" * 5000)
    row = letter_row(Record("wakeline.dead-letter", 3, 10, None, encode(long_names)))
    assert len(row[0]) == 249 and len(row[6]) == 249
