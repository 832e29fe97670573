"""Snapshots: the state as JSON round-trips exactly, a wake resumes from one to the same state
as a fold from the first event, and a snapshot that lies about its prefix is caught."""

from __future__ import annotations

import functools
import json

import pytest
from hypothesis import given

from tests.factories import draft, new_session_id, sealed
from wakeline.log.chain import canonical_json
from wakeline.contract.events import SnapshotPayload, SnapshotTaken
from wakeline.log.fold import FoldError, apply, fold
from wakeline.log.snapshots import SnapshotMismatch, checked_fold, current, resume, snapshot_payload
from wakeline.log.state import SessionState
from wakeline.log.state_json import STATE_FORMAT, state_from_json, state_hash, state_to_json

from .generated_logs import build, sessions
from .session_log import created, exchange


def with_snapshots(turns: int, every: int) -> list:
    """A log with a snapshot (of the fold so far) after every `every` drafts."""
    sid, drafts = new_session_id(), [created()]
    for turn in range(1, turns + 1):
        for d in exchange(turn):
            drafts.append(d)
            if len(drafts) % every == 0:
                drafts.append(draft(snapshot_payload(fold(sealed(drafts, sid)))))
    return sealed(drafts, sid)


@given(sessions())
def test_state_json_round_trips_exactly_through_canonical_bytes(session):
    state = fold(build(*session))
    data = state_to_json(state)
    assert state_from_json(json.loads(canonical_json(data))) == state
    assert state_to_json(state_from_json(data)) == data


@given(sessions())
def test_the_fold_is_the_same_as_applying_one_event_at_a_time(session):
    events = build(*session)
    assert fold(events) == functools.reduce(apply, events, SessionState())


@given(sessions())
def test_resuming_from_any_snapshot_gives_the_fold_from_the_first_event(session):
    events = build(*session)
    for at, event in enumerate(events):
        if isinstance(event, SnapshotTaken):
            assert resume(events[at:]) == fold(events)
    assert checked_fold(events) == fold(events)


def test_a_resumed_session_still_knows_every_input_before_its_snapshot():
    events = with_snapshots(turns=4, every=10)
    newest = max(at for at, e in enumerate(events) if isinstance(e, SnapshotTaken))
    woken = resume(events[newest:])
    assert woken.seen_commands == fold(events).seen_commands
    assert all(woken.has_seen(cmd) for cmd in ("cmd-create", "cmd-1", "cmd-2", "cmd-4"))


def test_the_state_hash_is_the_hash_of_the_state_it_holds():
    payload = snapshot_payload(fold(with_snapshots(turns=1, every=100)))
    assert payload.state_hash == state_hash(payload.state)


def test_a_snapshot_at_the_wrong_seq_does_not_resume():
    events = with_snapshots(turns=2, every=6)
    at = next(i for i, e in enumerate(events) if isinstance(e, SnapshotTaken))
    with pytest.raises(FoldError, match="holds the state at seq"):
        resume([events[at].model_copy(update={"seq": events[at].seq + 1})])


def lying(events: list, at: int, **changes) -> list:
    """The log sealed again with the snapshot at index `at` holding changed state: a
    correct chain around wrong content, as a forger with the brain's code would write it."""
    sid = events[0].session_id
    state = dict(events[at].payload.state, **changes)
    drafts = [draft(e.payload, e.causation_id, actor=e.actor, trust=e.trust) for e in events]
    drafts[at] = draft(SnapshotPayload(state=state, state_hash=state_hash(state), format=STATE_FORMAT))
    return sealed(drafts, sid)


def test_a_snapshot_that_lies_about_its_prefix_is_caught_at_its_seq():
    events = with_snapshots(turns=3, every=8)
    at = [i for i, e in enumerate(events) if isinstance(e, SnapshotTaken)][1]
    forged = lying(events, at, seen_commands="")
    with pytest.raises(SnapshotMismatch) as caught:
        checked_fold(forged)
    assert (caught.value.seq, "seen_commands" in caught.value.reason) == (forged[at].seq, True)
    assert resume(forged[at:]).seen_commands != fold(forged).seen_commands  # what a wake would have believed
    assert not resume(forged[at:]).has_seen("cmd-1")  # and a redelivered cmd-1 would be applied again


def test_a_snapshot_whose_hash_lies_is_caught():
    events = with_snapshots(turns=2, every=8)
    at = next(i for i, e in enumerate(events) if isinstance(e, SnapshotTaken))
    sid = events[0].session_id
    drafts = [draft(e.payload, e.causation_id, actor=e.actor, trust=e.trust) for e in events]
    drafts[at] = draft(events[at].payload.model_copy(update={"state_hash": "0" * 64}))
    with pytest.raises(SnapshotMismatch, match="state_hash"):
        checked_fold(sealed(drafts, sid))


def test_a_snapshot_of_another_format_is_not_resumed_from_nor_held_against_the_fold():
    """Written by code whose state had another shape or whose fold differed: a wake reads the
    whole log instead (wake.SessionLoader), and verify does not call it a lie."""
    events = with_snapshots(turns=1, every=8)  # one snapshot, at the end
    at = next(i for i, e in enumerate(events) if isinstance(e, SnapshotTaken))
    sid = events[0].session_id
    drafts = [draft(e.payload, e.causation_id, actor=e.actor, trust=e.trust) for e in events]
    drafts[at] = draft(events[at].payload.model_copy(update={"format": "0.old", "state": {"gone": 1}}))
    older = sealed(drafts, sid)
    assert not current(older[at]) and current(events[at])
    with pytest.raises(FoldError, match="format 0.old"):
        resume(older[at:])
    assert checked_fold(older) == fold(older)
