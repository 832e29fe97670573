"""Kill any process with SIGKILL, start a fresh one: the session carries on, nothing lost or doubled."""

from __future__ import annotations

import json

from tests.e2e.sessions import create_session, wait_ended, wait_for
from tests.e2e.stack import sandbox_work
from tests.e2e.stored_log import assert_log_whole, stored_events


def test_brain_killed_mid_turn_is_replaced_and_the_session_completes_without_gap(stack, client):
    sid = create_session(client, "slowmodel")
    # turn_started is recorded and the slow model call is in flight
    wait_for(lambda: any(e.type == "turn_started" for e in stored_events(sid)), 30, "turn 1 to start", stack)
    stack.services["brain"].kill9()
    stack.start("brain", "brain", WAKELINE_HOST="brain-2")
    session = wait_ended(client, stack, sid, timeout=120)
    assert session["ended_reason"] == "completed"
    events = assert_log_whole(sid)
    woke = [e for e in events if e.type == "woke"]
    assert woke and woke[0].payload.host == "brain-2"
    assert [e.type for e in events].count("model_turn") == 3


def test_runner_killed_mid_tool_reissues_the_call_and_the_side_effect_happens_once(stack, client):
    sid = create_session(client, "slowtool")
    counter = sandbox_work(stack, sid) / "count.txt"
    wait_for(lambda: counter.exists(), 30, "the tool to start", stack)
    stack.services["runner"].kill9()
    stack.start("runner", "runner", WAKELINE_HOST="runner-2")
    session = wait_ended(client, stack, sid, timeout=120)
    assert session["ended_reason"] == "completed"
    assert counter.read_text().splitlines() == ["ran"]
    events = assert_log_whole(sid)
    results = [e for e in events if e.type == "tool_result"]
    assert len(results) == 1 and json.loads(results[0].payload.output)["stdout"].strip() == "1"


def test_archiver_killed_mid_batch_restarts_and_stores_every_event_exactly_once(stack, client):
    # The slow session still has events to come when the kill lands: the fast ones may be
    # whole by then, since the archiver stores a burst within a tenth of a second.
    sids = [create_session(client, policy) for policy in ("slowmodel", "tools3", "tools3", "tools3")]
    wait_for(lambda: stored_events(sids[0]), 30, "archiving to begin", stack)
    stack.services["archiver"].kill9()
    # What the dead archiver had stored: the rest of these sessions, written to Kafka before
    # the kill or after it, is left for its successor (checked below, so the kill hit mid work).
    stored_at_kill = {sid: len(stored_events(sid)) for sid in sids}
    stack.start("archiver", "archiver", WAKELINE_HOST="archiver-2")
    for sid in sids:
        assert wait_ended(client, stack, sid, timeout=120)["ended_reason"] == "completed"
        events = assert_log_whole(sid)
        assert [e.type for e in events].count("session_created") == 1
        assert events[-1].type == "session_ended"
    left = {sid: len(stored_events(sid)) - stored_at_kill[sid] for sid in sids}
    assert sum(left.values()) > 0, f"every event was archived before the kill: {stored_at_kill}"
