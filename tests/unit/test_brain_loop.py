"""The brain's decisions driven purely: inputs, next steps and model replies, no I/O."""

import asyncio
import uuid
from pathlib import Path

from wakeline.contract import commands as c
from wakeline.log.chain import first_broken_seq
from wakeline.agent.inputs import handle_input
from wakeline_brain.scripted import ScriptedModel, load_policy
from wakeline.agent.context import build_request
from wakeline.agent.steps import CALL_MODEL, model_drafts, next_step

from tests.unit.folded_log import Log

POLICIES = Path(__file__).resolve().parents[2] / "services" / "brain" / "policies"


def drive(log, sid, model, runner=lambda call: ("ok", False), limit=200):
    """Runs next_step to quiescence, answering model calls and tool calls inline."""
    for _ in range(limit):
        step = next_step(log.state)
        if step is CALL_MODEL:
            reply = asyncio.run(model.complete(build_request(log.state, [])))
            log.append(model_drafts(log.state, reply, f"agent:{model.name}"), sid)
        elif step:
            log.append(step, sid)
        elif log.state.pending_tool_calls and not log.state.awaiting_approval:
            call = log.state.pending_tool_calls[0]
            out, err = runner(call)
            report = c.ToolResultReport(session_id=sid, tenant="t", tool_call_id=call.tool_call_id, name=call.name,
                                        output=out, is_error=err, runner="test")
            log.append(handle_input(log.state, report), sid)
        else:
            return
    raise AssertionError("session did not settle")


def create(sid, **config):
    return c.CreateSession(command_id=str(uuid.uuid4()), session_id=sid, tenant="t", actor="user:ann",
                           message="do the demo", config={"model": "scripted:demo", **config})


def test_demo_policy_session_runs_tools_and_completes_with_a_valid_chain():
    sid, log = str(uuid.uuid4()), Log()
    log.append(handle_input(log.state, create(sid)), sid)
    drive(log, sid, ScriptedModel(load_policy(POLICIES, "demo")))
    types = [e.type for e in log.events]
    assert log.state.ended_reason == "completed"
    assert types.count("tool_call") == types.count("tool_result") == 5
    assert types[-1] == "session_ended" and "turn_ended" in types
    assert first_broken_seq(log.events) is None
    assert all(e.trust == "data" for e in log.events if e.type == "tool_result")
    assert log.events[-3].actor == "agent:scripted:demo"


def test_turn_budget_ends_session_with_max_turns():
    sid, log = str(uuid.uuid4()), Log()
    log.append(handle_input(log.state, create(sid, max_turns=2)), sid)
    drive(log, sid, ScriptedModel(load_policy(POLICIES, "demo")))
    assert log.state.ended_reason == "max_turns"
    assert log.state.turns == 2


def test_redelivered_inputs_are_no_ops():
    sid, log = str(uuid.uuid4()), Log()
    cmd = create(sid)
    log.append(handle_input(log.state, cmd), sid)
    assert handle_input(log.state, cmd) == []
    post = c.PostMessage(command_id="m1", session_id=sid, tenant="t", actor="user:ann", text="again")
    log.append(handle_input(log.state, post), sid)
    assert handle_input(log.state, post) == []


def test_stale_expected_seq_is_rejected_as_conflict():
    sid, log = str(uuid.uuid4()), Log()
    log.append(handle_input(log.state, create(sid)), sid)
    post = c.PostMessage(command_id="m1", session_id=sid, tenant="t", text="x", expected_seq=1)
    [draft] = handle_input(log.state, post)
    assert draft.type == "input_rejected" and draft.payload.reason.startswith("conflict")


def test_message_during_turn_is_queued_then_taken_when_turn_ends():
    sid, log = str(uuid.uuid4()), Log()
    log.append(handle_input(log.state, create(sid)), sid)
    log.append(next_step(log.state), sid)  # turn_started
    assert next_step(log.state) is CALL_MODEL
    post = c.PostMessage(command_id="q1", session_id=sid, tenant="t", text="also this")
    [queued] = handle_input(log.state, post)
    assert queued.type == "message_queued"
    log.append([queued], sid)
    drive(log, sid, ScriptedModel(load_policy(POLICIES, "demo")))
    taken = [e for e in log.events if e.type == "user_message" and e.causation_id == "q1"]
    assert len(taken) == 1 and not log.state.queued


def test_continuing_an_ended_session_extends_the_same_sequence():
    sid, log = str(uuid.uuid4()), Log()
    log.append(handle_input(log.state, create(sid)), sid)
    drive(log, sid, ScriptedModel(load_policy(POLICIES, "demo")))
    ended_at = log.state.last_seq
    post = c.PostMessage(command_id="again", session_id=sid, tenant="t", text="once more")
    log.append(handle_input(log.state, post), sid)
    drive(log, sid, ScriptedModel(load_policy(POLICIES, "demo")))
    assert log.state.last_seq > ended_at and log.state.ended_reason == "completed"
    assert first_broken_seq(log.events) is None


def test_a_cancelled_sessions_pending_call_can_be_neither_approved_nor_denied():
    sid, log = str(uuid.uuid4()), Log()
    log.append(handle_input(log.state, create(sid, require_approval=["list_files"])), sid)
    drive(log, sid, ScriptedModel(load_policy(POLICIES, "demo")))
    [call_id] = log.state.awaiting_approval
    cancel = c.CancelSession(command_id="x1", session_id=sid, tenant="t")
    log.append(handle_input(log.state, cancel), sid)
    assert log.state.status == "ended"
    for cmd in (c.ApproveToolCall(command_id="a1", session_id=sid, tenant="t", tool_call_id=call_id),
                c.DenyToolCall(command_id="d1", session_id=sid, tenant="t", tool_call_id=call_id, reason="late")):
        drafts = handle_input(log.state, cmd)
        assert [type(d.payload).__name__ for d in drafts] == ["InputRejectedPayload"]
        assert drafts[0].payload.code == "already_ended"
        log.append(drafts, sid)
    assert not [e for e in log.events if e.type in ("approval_granted", "approval_denied", "tool_result")]


def test_tool_requiring_approval_waits_and_denial_records_an_error_result():
    sid, log = str(uuid.uuid4()), Log()
    log.append(handle_input(log.state, create(sid, require_approval=["list_files"])), sid)
    drive(log, sid, ScriptedModel(load_policy(POLICIES, "demo")))
    assert log.state.awaiting_approval and log.state.status == "running"
    [call_id] = log.state.awaiting_approval
    deny = c.DenyToolCall(command_id="d1", session_id=sid, tenant="t", tool_call_id=call_id, reason="no")
    log.append(handle_input(log.state, deny), sid)
    result = log.events[-1]
    assert result.type == "tool_result" and result.payload.is_error and result.payload.error_kind == "denied"
