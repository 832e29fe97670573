"""One session's bad input parks that session, never the actor loop or the brain.

The actor runs against explicit doubles (`FakeWriter` keeps appended records in memory,
`FakeModel` answers from a list): the I/O edges are covered on the real stack in
tests/e2e/test_failure_isolation.py.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timezone

import asyncpg
import pytest

from wakeline.contract import commands as c
from wakeline.contract.events import parse_event
from wakeline.log.fold import FoldError
from wakeline.contract.topics import EVENTS, TOOL_CALLS
from wakeline_brain.actor import SessionActor
from wakeline_brain.actor_deps import ActorDeps
from wakeline.agent.model import ModelReply, ToolUse
from wakeline.agent.parking import park_drafts
from wakeline.agent.inputs import handle_input
from wakeline.agent.steps import model_drafts, next_step
from wakeline_brain.wake import WakeIncomplete
from tests.unit.folded_log import Log  # seals and folds drafts, purely

LIMIT = 20_000


class FakeWriter:
    partition = 0

    def __init__(self):
        self.records = []

    async def append(self, records):
        self.records.extend(records)

    def events(self):
        return [parse_event(r.value) for r in self.records if r.topic == EVENTS]


class FakeModel:
    name = "fake"

    def __init__(self, replies):
        self.replies = list(replies)

    async def complete(self, request):
        return self.replies.pop(0)


def make_actor(model, load=None):
    writer, released, letters = FakeWriter(), [], []

    async def dead_letter(item, reason):
        letters.append((item, reason))

    async def own_history(session_id, tenant, partition, whole=False):
        return writer.events()  # what this actor appended before: a later run wakes from it

    deps = ActorDeps(host="test", idle_evict_s=0.2, load=load or own_history, model_for=lambda name: model,
                     tools=[], release=released.extend, dead_letter=dead_letter,
                     now=lambda: datetime.now(timezone.utc), new_id=lambda: str(uuid.uuid4()),
                     max_record_bytes=LIMIT)
    actor = SessionActor(session_id="s1", tenant="t", partition=0, writer=writer, deps=deps)
    return actor, writer, released, letters


def create(text="hi"):
    return c.CreateSession(command_id=f"create-{uuid.uuid4()}", session_id="s1", tenant="t", actor="user:ann",
                           message=text, config={"model": "fake"})


def post(text, tenant="t"):
    return c.PostMessage(command_id=f"post-{uuid.uuid4()}", session_id="s1", tenant=tenant, actor="user:ann",
                         text=text)


async def run_with(actor, *inputs):
    for token, item in enumerate(inputs):
        actor.mailbox.put_nowait((item, token))
    await asyncio.wait_for(actor.run("test"), timeout=10)  # returns on idle eviction


async def test_an_oversized_message_is_rejected_as_too_large_and_the_next_message_is_taken():
    model = FakeModel([ModelReply(text="one"), ModelReply(text="two")])
    actor, writer, released, letters = make_actor(model)
    big, small = post("é" * LIMIT), post("and now this")
    await run_with(actor, create(), big, small)
    events = writer.events()
    rejected = [e for e in events if e.type == "input_rejected"]
    assert [(r.payload.code, r.causation_id) for r in rejected] == [("too_large", big.command_id)]
    assert "max_record_bytes" in rejected[0].payload.reason
    assert [e.payload.text for e in events if e.type == "user_message"] == ["hi", "and now this"]
    # the small message arrived during the first turn: queued, then taken by a second turn
    assert [e.type for e in events].count("turn_started") == 2
    assert [e.payload.reason for e in events if e.type == "session_ended"] == ["completed"]
    assert [item.command_id for item, _ in letters] == [big.command_id]
    assert sorted(released) == [0, 1, 2]
    assert all(len(r.value) <= LIMIT for r in writer.records)


async def test_a_model_reply_over_the_limit_parks_the_session_and_a_new_message_continues_it():
    model = FakeModel([ModelReply(text="x" * LIMIT), ModelReply(text="fine now")])
    actor, writer, released, _ = make_actor(model)
    await run_with(actor, create())
    await run_with(actor, post("again"))
    ended = [e.payload for e in writer.events() if e.type == "session_ended"]
    assert ended[0].reason == "error" and "too_large" in ended[0].detail
    assert ended[1].reason == "completed"
    assert released == [0, 0]


async def test_a_tool_call_whose_request_is_too_large_parks_the_session_instead_of_looping():
    huge = ToolUse(id="tc-1", name="bash", input={"command": "x" * LIMIT})
    model = FakeModel([ModelReply(tool_uses=[huge]), ModelReply(tool_uses=[huge])])
    actor, writer, released, _ = make_actor(model)
    await run_with(actor, create())
    assert not [r for r in writer.records if r.topic == TOOL_CALLS]
    assert [e.payload.reason for e in writer.events() if e.type == "session_ended"] == ["error"]
    assert released == [0]


async def test_an_input_for_another_tenant_is_rejected_with_its_code():
    actor, writer, _, _ = make_actor(FakeModel([ModelReply(text="ok")]))
    foreign = post("let me in", tenant="other")
    await run_with(actor, create(), foreign)
    rejected = [e.payload for e in writer.events() if e.type == "input_rejected"]
    assert [(p.code, p.command_id) for p in rejected] == [("wrong_tenant", foreign.command_id)]
    assert {e.tenant for e in writer.events()} == {"t"}


async def test_a_session_woken_by_a_foreign_tenant_continues_under_its_own_tenant():
    first, writer0, _, _ = make_actor(FakeModel([ModelReply(text="ok")]))
    await run_with(first, create())
    history = writer0.events()

    async def load(session_id, tenant, partition, whole=False):
        return history

    actor, writer, _, _ = make_actor(FakeModel([]), load=load)
    actor.tenant = "other"  # the claim of the input that woke it
    await run_with(actor, post("hijack", tenant="other"))
    assert {e.tenant for e in writer.events()} == {"t"}
    assert [e.payload.code for e in writer.events() if e.type == "input_rejected"] == ["wrong_tenant"]


async def test_a_log_that_does_not_fold_refuses_the_inputs_and_releases_them():
    async def load(session_id, tenant, partition, whole=False):
        raise FoldError("expected seq 1, got 7")

    actor, writer, released, letters = make_actor(FakeModel([]), load=load)
    await run_with(actor, post("a"), post("b"))
    assert writer.records == []
    assert sorted(released) == [0, 1] and len(letters) == 2
    assert all("cannot be woken" in reason for _, reason in letters)


@pytest.mark.parametrize("weather", [WakeIncomplete("tail not read yet"),
                                     asyncpg.AdminShutdownError("terminating connection due to administrator command"),
                                     asyncpg.CannotConnectNowError("the database system is starting up"),
                                     ConnectionResetError("reset by peer")])
async def test_a_transient_load_failure_is_waited_out(weather):
    calls = []

    async def load(session_id, tenant, partition, whole=False):
        calls.append(1)
        if len(calls) < 3:
            raise weather
        return []

    actor, writer, released, letters = make_actor(FakeModel([ModelReply(text="ok")]), load=load)
    await run_with(actor, create())
    assert len(calls) == 3 and not letters and released == [0]
    assert writer.events()[-1].type == "session_ended"


async def test_a_bug_while_handling_an_input_parks_the_session_with_internal_error():
    actor, writer, released, letters = make_actor(FakeModel([ModelReply(text="ok")]))
    await run_with(actor, create())
    clock = actor.deps.now
    broken = iter([False, True])  # the woke marker is sealed; the message's event is not
    actor.deps.now = lambda: (_ for _ in ()).throw(RuntimeError("clock broke")) if next(broken, False) else clock()
    message = post("boom")
    await run_with(actor, message)
    rejected = [e.payload for e in writer.events() if e.type == "input_rejected"]
    assert [(p.code, p.command_id) for p in rejected] == [("internal_error", message.command_id)]
    assert "clock broke" in rejected[0].reason
    assert letters and letters[0][0].command_id == message.command_id
    assert 0 in released


def test_park_drafts_answers_a_pending_call_with_an_error_result():
    log = Log()
    log.append(handle_input(log.state, create()), "s1")
    log.append(next_step(log.state), "s1")
    call = ToolUse(id="tc-1", name="bash", input={"command": "true"})
    log.append(model_drafts(log.state, ModelReply(tool_uses=[call]),
                            "agent:fake"), "s1")
    report = c.ToolResultReport(session_id="s1", tenant="t", tool_call_id="tc-1", name="bash",
                                output="y" * 100, runner="r1")
    drafts = park_drafts(log.state, report, "too_large", "too big")
    assert [d.type for d in drafts] == ["tool_result"]
    assert drafts[0].payload.is_error and json.loads(drafts[0].payload.output)["original_bytes"] == 100
    log.append(drafts, "s1")
    assert not log.state.pending_tool_calls
