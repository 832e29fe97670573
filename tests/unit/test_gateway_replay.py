"""Replay and stream frames are pure renderings of the log."""

from __future__ import annotations

import base64
import json

import pytest

from wakeline.contract.events import SnapshotPayload, parse_event
from wakeline.log.fold import fold
from wakeline.log.snapshots import SnapshotMismatch, snapshot_payload
from wakeline.log.state_json import STATE_FORMAT, state_hash
from wakeline_gateway.replay import replay_steps, state_json
from wakeline_gateway.sse import ends_stream, frame

from tests.factories import draft, new_session_id, redrafted, sealed

from .session_log import conversation


def test_replay_has_one_step_per_event_ending_in_the_folded_state() -> None:
    events = conversation(12, new_session_id())
    steps = replay_steps(events)
    assert [(s["seq"], s["type"]) for s in steps] == [(e.seq, e.type) for e in events]
    assert steps[-1]["state"] == state_json(fold(events))
    assert steps[4]["state"]["pending_tool_calls"][0]["name"] == "bash"


def test_replay_state_is_json_with_sets_as_sorted_lists() -> None:
    events = conversation(12, new_session_id())
    state = replay_steps(events)[-1]["state"]
    assert json.loads(json.dumps(state)) == state
    assert state["awaiting_approval"] == sorted(state["awaiting_approval"])
    assert len(base64.b64decode(state["seen_commands"])) == 8 * len(fold(events).seen_commands) >= 8 * 2
    assert state["config"]["require_approval"] == ["bash"]
    assert state["messages"][0]["blocks"][0] == {"text": "question 1", "type": "text"}


def test_a_frame_carries_seq_type_and_the_event_on_one_data_line() -> None:
    event = conversation(2, new_session_id())[1]
    lines = frame(event).split("\n")
    assert lines[:2] == [f"id: {event.seq}", "event: user_message"] and lines[3:] == ["", ""]
    assert parse_event(lines[2].removeprefix("data: ")) == event


def test_the_stream_ends_on_deleted_and_on_session_ended_only_when_asked() -> None:
    assert ends_stream("deleted", until_end=False) and ends_stream("session_ended", until_end=True)
    assert not ends_stream("session_ended", until_end=False)
    assert not ends_stream("user_message", until_end=True) and not ends_stream(None, until_end=True)


def test_replay_checks_each_snapshot_against_the_state_before_it() -> None:
    sid = new_session_id()
    drafts = redrafted(conversation(6, sid))
    honest = sealed(drafts + [draft(snapshot_payload(fold(conversation(6, sid))))], sid)
    assert replay_steps(honest)[-1]["state"] == state_json(fold(honest))
    forged = dict(honest[-1].payload.state, turns=99)
    forgery = SnapshotPayload(state=forged, state_hash=state_hash(forged), format=STATE_FORMAT)
    lying = sealed(drafts + [draft(forgery)], sid)
    with pytest.raises(SnapshotMismatch, match="snapshot at seq 7: .* in turns"):
        replay_steps(lying)
