"""`wakeline.log.status`: the `sessions` row `advance` keeps agrees with `fold` on every log the brain can write."""

from __future__ import annotations

from typing import get_args

import pytest
from hypothesis import given, strategies as st

from tests.factories import draft, sealed
from wakeline.contract.events import EndReason
from wakeline.log.fold import apply
from wakeline.log.state import SessionState
from wakeline.log.status import NoSessionRow, SessionRow, advance, project, session_status

from .session_log import created
from .generated_logs import CONTENT, MARKERS, content_draft, marker

# What decides a status (turn boundaries, messages, ends) drawn on its own too, so it comes
# often; a deletion comes at most once, at a drawn point, since nothing after it counts.
DECISIVE = st.tuples(st.sampled_from(["turn_started", "turn_ended", "user_message", "session_ended"]),
                     st.sampled_from(get_args(EndReason)))
# Declared tools' calls and their results (issue 32): what `waiting_client` is decided by.
CLIENT = st.tuples(st.sampled_from(["client_call", "client_result"]), st.sampled_from(["tc-c", "tc-d"]))
STEPS = st.lists(st.one_of(CONTENT, st.tuples(st.sampled_from(sorted(MARKERS)), st.none()), DECISIVE, CLIENT),
                 min_size=10, max_size=40)  # every prefix is checked too
DELETION = st.one_of(st.none(), st.tuples(st.integers(0, 40), st.sampled_from(["user:alice", "user:bob"])))


def valid_log(steps: list[tuple[str, object]], deletion: tuple[int, str] | None = None) -> list:
    """The steps as the brain would record them: it starts (or queues) no turn in an ended or
    deleted session (`steps.next_step`), and refuses a second deletion (rejection code `deleted`)."""
    if deletion is not None:
        steps = steps[:deletion[0]] + [("deleted", deletion[1])] + steps[deletion[0]:]
    drafts, ended, deleted, waiting = [created()], False, False, set()
    for kind, arg in steps:
        if kind in ("turn_started", "turn_queued") and (ended or deleted):
            continue
        if kind == "client_call" and arg not in waiting:  # a call id is issued once
            waiting.add(arg)
            drafts.append(draft("tool_call", tool_call_id=arg, name="run_query", input={}, answered_by="client"))
        elif kind == "client_result" and arg in waiting:  # a result is recorded only for a waiting call
            waiting.discard(arg)
            drafts.append(draft("tool_result", tool_call_id=arg, name="run_query", output="rows",
                                answered_by="client"))
        elif kind in ("client_call", "client_result"):
            continue
        elif kind == "session_ended":
            drafts.append(draft(kind, reason=arg))
        elif kind == "deleted":
            drafts.append(draft(kind, by=arg))
        elif kind in MARKERS:
            drafts.append(marker(kind, drafts))
        else:
            drafts.append(content_draft(kind, str(arg), len(drafts)))
        if kind == "session_ended":
            waiting.clear()  # the end stops the wait (wakeline.log.fold)
        ended = (ended or kind == "session_ended") and kind != "user_message"
        deleted = deleted or kind == "deleted"
    return sealed(drafts, "sess-generated")


def in_fold_terms(row: SessionRow) -> tuple:
    return row.status, row.last_seq, row.last_hash, row.title, row.ended_reason, row.deleted_by


def state_terms(state: SessionState) -> tuple:
    return state.status, state.last_seq, state.last_hash, state.title, state.ended_reason, state.deleted_by


@given(STEPS, DELETION)
def test_advance_agrees_with_the_fold_after_every_event_of_a_valid_log(steps, deletion) -> None:
    state, row = SessionState(), None
    for event in valid_log(steps, deletion):
        state, row = apply(state, event), advance(row, event)
        assert in_fold_terms(row) == state_terms(state)
        assert (row.tenant, row.session_id, row.owner, row.model) == \
            (state.tenant, state.session_id, state.owner, state.config.model)
        assert row.updated_at == event.ts


def test_every_status_a_row_can_hold_is_reached_by_a_valid_log() -> None:
    steps = [("user_message", "go"), ("turn_started", None), ("client_call", "tc-c"), ("client_call", "tc-d"),
             ("client_result", "tc-c"), ("client_result", "tc-d"), ("session_ended", "completed"),
             ("user_message", "again")]
    row, seen = None, []
    for event in valid_log(steps, (8, "user:bob")):
        row = advance(row, event)
        seen.append(row.status)
    assert seen == ["idle", "idle", "running", "waiting_client", "waiting_client", "waiting_client", "running",
                    "ended", "idle", "deleted"]


def test_the_end_stops_the_wait_for_the_harness_in_the_row_and_the_fold() -> None:
    steps = [("user_message", "go"), ("turn_started", None), ("client_call", "tc-c"),
             ("session_ended", "cancelled"), ("user_message", "again"), ("turn_started", None)]
    state, row = SessionState(), None
    for event in valid_log(steps):
        state, row = apply(state, event), advance(row, event)
    assert row.status == state.status == "running" and row.pending_client == 0
    assert state.pending_tool_calls == ()


def test_the_first_deletion_is_the_one_the_row_keeps() -> None:
    events = sealed([created(), draft("deleted", by="user:alice"), draft("deleted", by="user:bob")], "sess-twice")
    row = None
    for event in events:
        row = advance(row, event)
    assert (row.status, row.deleted_by, row.deleted_at, row.last_seq) == ("deleted", "user:alice", events[1].ts, 3)


def test_no_row_moves_before_its_session_created() -> None:
    [_, message] = sealed([created(), draft("user_message", text="hi")], "sess-headless")
    with pytest.raises(NoSessionRow, match="user_message at seq 2 of sess-headless"):
        advance(None, message)


@pytest.mark.parametrize("flags, expected", [
    (dict(deleted=True, ended=True, in_turn=True), "deleted"),
    (dict(deleted=False, ended=True, in_turn=True), "ended"),
    (dict(deleted=False, ended=False, in_turn=True), "running"),
    (dict(deleted=False, ended=False, in_turn=False), "idle"),
    (dict(deleted=False, ended=False, in_turn=False, created=False), "new"),
])
def test_deleted_beats_ended_beats_running_beats_idle(flags, expected) -> None:
    assert session_status(**flags) == expected


def one_at_a_time(prev: SessionRow | None, events: list) -> SessionRow | None:
    """The projection's rules over `advance`, an event at a time, as the archiver had it."""
    row = prev
    for event in events:
        if row is not None and event.seq <= row.last_seq:
            continue
        try:
            row = advance(row, event)
        except NoSessionRow:
            continue
    return row


@given(STEPS, DELETION, st.integers(0, 50), st.integers(0, 50), st.integers(0, 50))
def test_a_batch_projects_to_the_row_advance_reaches_one_event_at_a_time(steps, deletion, cut, low, high) -> None:
    """`project` (the archiver's batch) against `advance` event by event: from no row or from
    the row at any point, with any stretch of the log as the batch: one that begins before
    session_created, redelivers what the row holds (in part or only that), or jumps ahead."""
    events = valid_log(steps, deletion)
    prev = one_at_a_time(None, events[:min(cut, len(events))])
    batch = events[min(low, high):max(low, high)]
    assert project(prev, batch) == one_at_a_time(prev, batch)
    assert project(prev, []) == prev


def test_a_redelivered_session_created_does_not_reopen_the_row() -> None:
    events = sealed([created(), draft("user_message", text="hi"), draft("session_ended", reason="completed")],
                    "sess-again")
    row = project(None, events)
    assert (row.status, row.last_seq) == ("ended", 3)
    assert project(row, events[:1]) == row
