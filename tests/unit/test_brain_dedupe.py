"""What a session remembers of its inputs: a command already in the log and a result for a
call already resolved are no-ops, in a session woken from a snapshot as in one never
evicted, and the snapshot does not grow with tool results."""

import base64
import uuid

import pytest

from wakeline.contract import commands as c
from wakeline.log.chain import Draft
from wakeline.contract.events import SnapshotTaken, ToolResultPayload
from wakeline.log.snapshots import resume, snapshot_payload
from wakeline.agent.inputs import handle_input
from wakeline.agent.model import ModelReply, ToolUse
from wakeline.agent.parking import park_drafts
from wakeline.agent.steps import CALL_MODEL, model_drafts, next_step

from tests.unit.folded_log import Log

ANN = "user:ann"


def report(sid: str, call_id: str, output: str = "a.txt") -> c.ToolResultReport:
    return c.ToolResultReport(session_id=sid, tenant="t", tool_call_id=call_id, name="list_files",
                              output=output, runner="r1")


def post(sid: str, command_id: str) -> c.PostMessage:
    return c.PostMessage(command_id=command_id, session_id=sid, tenant="t", actor=ANN, text=f"say {command_id}")


class Session:
    """A session driven as the brain drives it: each turn one tool call, its result, an answer."""

    def __init__(self, **config):
        self.sid, self.log, self.calls = str(uuid.uuid4()), Log(), 0
        self.input(c.CreateSession(command_id="create", session_id=self.sid, tenant="t", actor=ANN,
                                   message="start", config={"model": "fake", **config}))

    def input(self, item) -> list[Draft]:
        drafts = handle_input(self.log.state, item)
        self.log.append(drafts, self.sid)
        return drafts

    def steps_until_the_model(self) -> None:
        while (step := next_step(self.log.state)) is not CALL_MODEL:
            self.log.append(step, self.sid)

    def model_calls_a_tool(self) -> str:
        self.steps_until_the_model()
        self.calls += 1
        call_id = f"toolu_{self.calls}"
        reply = ModelReply(tool_uses=[ToolUse(id=call_id, name="list_files", input={})])
        self.log.append(model_drafts(self.log.state, reply, "agent:fake"), self.sid)
        return call_id

    def turn(self, command_id: str) -> None:
        self.input(post(self.sid, command_id))
        self.input(report(self.sid, self.model_calls_a_tool()))
        self.steps_until_the_model()
        self.log.append(model_drafts(self.log.state, ModelReply(text="done"), "agent:fake"), self.sid)
        while step := next_step(self.log.state):
            self.log.append(step, self.sid)

    def snapshot(self) -> None:
        self.log.append([Draft(payload=snapshot_payload(self.log.state), actor="system:brain",
                               trust="instruction")], self.sid)

    def woken(self):
        """The state a wake builds: the newest snapshot and what follows, nothing before."""
        at = max(i for i, e in enumerate(self.log.events) if isinstance(e, SnapshotTaken))
        woken = resume(self.log.events[at:])
        assert woken == self.log.state
        return woken


@pytest.mark.parametrize("command", [
    lambda sid: post(sid, "m1"),
    lambda sid: c.CancelSession(command_id="m1", session_id=sid, tenant="t", actor=ANN),
    lambda sid: c.WakeSession(command_id="m1", session_id=sid, tenant="t", actor=ANN),
    lambda sid: c.ApproveToolCall(command_id="m1", session_id=sid, tenant="t", tool_call_id="toolu_none"),
], ids=["post", "cancel", "wake", "rejected"])
def test_a_command_applied_before_the_snapshot_is_a_no_op_after_a_wake(command):
    session = Session()
    session.turn("m0")
    assert session.input(command(session.sid))  # applied once: it recorded something
    session.turn("m2")
    session.snapshot()
    session.turn("m3")
    woken = session.woken()
    assert handle_input(woken, command(session.sid)) == []
    assert park_drafts(woken, command(session.sid), "too_large", "x") == []  # and not recorded as rejected either
    assert handle_input(woken, command(session.sid).model_copy(update={"command_id": "m9"}))  # a new id is applied


def test_a_tool_result_recorded_before_the_snapshot_is_a_no_op_after_a_wake():
    session = Session()
    session.turn("m1")
    first = session.log.events[-1].seq
    session.snapshot()
    session.turn("m2")
    woken = session.woken()
    assert not woken.has_seen(c.result_input_id("toolu_1"))  # not remembered: not needed
    assert handle_input(woken, report(session.sid, "toolu_1")) == []
    assert handle_input(woken, report(session.sid, "toolu_2", output="other")) == []
    assert session.log.state.last_seq > first


def test_a_redelivered_result_for_a_call_still_pending_at_the_snapshot_is_recorded_once():
    session = Session()
    session.input(post(session.sid, "m1"))
    call_id = session.model_calls_a_tool()
    session.snapshot()  # the call is pending in the snapshot
    assert [type(d.payload) for d in session.input(report(session.sid, call_id))] == [ToolResultPayload]
    woken = session.woken()  # a crash before the result's offset was committed: it comes again
    assert handle_input(woken, report(session.sid, call_id)) == []


def test_a_result_arriving_after_its_call_was_denied_is_a_no_op():
    session = Session(require_approval=["list_files"])
    session.input(post(session.sid, "m1"))
    call_id = session.model_calls_a_tool()
    session.input(c.DenyToolCall(command_id="d1", session_id=session.sid, tenant="t", tool_call_id=call_id))
    session.snapshot()
    assert handle_input(session.woken(), report(session.sid, call_id)) == []


def test_a_runner_result_after_the_hands_answered_the_call_is_a_no_op():
    session = Session()
    session.input(post(session.sid, "m1"))
    call_id = session.model_calls_a_tool()
    session.input(c.TakeOver(command_id="t1", session_id=session.sid, tenant="t", actor="human:ann"))
    submit = c.SubmitToolResult(command_id="s1", session_id=session.sid, tenant="t", actor="human:ann",
                                tool_call_id=call_id, output="by hand")
    assert session.input(submit)
    session.input(c.HandBack(command_id="h1", session_id=session.sid, tenant="t", actor="human:ann"))
    session.snapshot()
    woken = session.woken()
    assert handle_input(woken, report(session.sid, call_id)) == []
    assert handle_input(woken, submit) == []  # the hands' own retry: a command, remembered by its id


def test_a_runner_result_after_a_failed_result_was_recorded_for_it_is_a_no_op():
    session = Session()
    session.input(post(session.sid, "m1"))
    call_id = session.model_calls_a_tool()
    too_big = report(session.sid, call_id, output="x" * 100)
    session.log.append(park_drafts(session.log.state, too_big, "too_large", "over the limit"), session.sid)
    assert session.log.events[-1].payload.is_error
    session.snapshot()
    woken = session.woken()
    assert handle_input(woken, too_big) == [] and park_drafts(woken, too_big, "too_large", "again") == []


def test_the_snapshot_grows_with_commands_by_eight_bytes_each_and_not_with_tool_results():
    few, many = Session(max_turns=100), Session(max_turns=100)
    for session, results in ((few, 1), (many, 50)):  # one command each, then its tool results
        session.input(post(session.sid, "m1"))
        for _ in range(results):
            assert session.input(report(session.sid, session.model_calls_a_tool()))
        session.snapshot()
    packed = [base64.b64decode(s.log.events[-1].payload.state["seen_commands"]) for s in (few, many)]
    assert packed[0] == packed[1] and len(packed[0]) == 8 * 2  # "create" and "m1"
