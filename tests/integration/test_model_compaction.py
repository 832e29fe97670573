"""A compaction written by the model, through the real `anthropic` SDK against the local
Messages-API server: the summary request is one the server received, its usage is recorded
in the compaction event, the recent exchanges and the system prompt reach the next request
whole, both token figures are the API's counts (count_tokens, which decides the compaction
even where the local estimate would not), and the replay check accepts the session."""

from __future__ import annotations

import json
import uuid

from tests.fakes.messages_api import FakeMessagesAPI, text_message, tool_use_message
from actor_harness import INPUTS, Partition, eventually, run_until_idle
from wakeline.contract import commands as c
from wakeline.log.chain import first_broken_seq
from wakeline.log.fold import fold
from wakeline.contract.tools import tool_schemas
from wakeline.contract.topics import TOOL_RESULTS
from wakeline_brain.claude import ClaudeModel
from wakeline.agent.context import build_request, estimate_tokens
from wakeline.agent.replay_check import first_divergence
from wakeline.agent.summary import SUMMARY_SYSTEM
from wakeline_gateway.cost import session_cost

MODEL = "claude-test-model"
SYSTEM = "You are the compaction test's agent."
TASK = "Remember the code word PELICAN. " + "Context to carry along. " * 180  # ~4.3k chars: over 3/4 of 1024 tokens


async def answer(part: Partition, actor, sid: str, call_id: str, output: str) -> None:
    part.deliver(actor, c.ToolResultReport(session_id=sid, tenant="t", tool_call_id=call_id, name="bash",
                                           output=output, runner="r1"), TOOL_RESULTS)
    await run_until_idle(actor)


async def compacting_session(window: int) -> tuple[str, list, FakeMessagesAPI]:
    """Two tool rounds, then the model's summary, then its last reply; the server's record."""
    api = FakeMessagesAPI().start()
    model = ClaudeModel(MODEL, "test-key-not-real", base_url=api.base_url, max_retries=0)
    api.enqueue(tool_use_message("bash", {"command": "echo one"}, id="toolu_one", text="First."),
                tool_use_message("bash", {"command": "echo two"}, id="toolu_two", text="Second."),
                text_message("SUMMARY: the user asked to remember PELICAN; echo one printed one.",
                             input_tokens=900, output_tokens=21),
                text_message("PELICAN. Done.", input_tokens=300, output_tokens=4))
    part, sid = Partition(), f"s-{uuid.uuid4().hex[:8]}"
    await part.writer.start()
    try:
        actor = part.actor(sid, model)
        create = c.CreateSession(command_id=f"create-{uuid.uuid4()}", session_id=sid, tenant="t", actor="user:ann",
                                 message=TASK, config={"model": MODEL, "context_window": window,
                                                       "system_prompt": SYSTEM})
        part.deliver(actor, create)
        await run_until_idle(actor)
        await answer(part, actor, sid, "toolu_one", "one")
        await answer(part, actor, sid, "toolu_two", "two")
        await eventually(lambda: part.committed_offset(INPUTS[1]) == 2)
    finally:
        await part.writer.close()
        await model.close()
        api.stop()
    return sid, part.events(sid), api


def counted(received) -> int:
    """What the server answered a count_tokens request (its deterministic count)."""
    return len(json.dumps(received.body, sort_keys=True)) // 4


def counts_around_the_summary(api: FakeMessagesAPI) -> tuple[int, int]:
    """The server's counts of the request before the summary call and of the one it left."""
    paths = [r.path for r in api.requests]
    ask = next(i for i, r in enumerate(api.requests) if r.path == "/v1/messages" and
               _text(r.body["system"]) == SUMMARY_SYSTEM)
    before = next(r for r in reversed(api.requests[:ask]) if r.path == "/v1/messages/count_tokens")
    after = api.requests[ask + 1]
    assert after.path == "/v1/messages/count_tokens", paths  # counted right after the summary
    assert "[Summary of earlier conversation]" in str(after.body["messages"][0])
    return counted(before), counted(after)


async def test_the_model_writes_the_summary_recorded_with_its_usage_and_the_recent_turns_stay_verbatim():
    sid, events, api = await compacting_session(window=1024)
    assert first_broken_seq(events) is None and events[-1].type == "session_ended"
    bodies = api.bodies()
    assert len(bodies) == 4
    summary_ask = bodies[2]
    # The system prompt goes as text, or (with prompt caching, issue 15) as blocks.
    assert _text(summary_ask["system"]) == SUMMARY_SYSTEM and not summary_ask.get("tools")
    asked = summary_ask["messages"][0]["content"][0]["text"]
    assert "PELICAN" in asked and "toolu_one" not in asked  # the covered part: the task, not the recent turns

    [compaction] = [e for e in events if e.type == "compaction"]
    p = compaction.payload
    assert p.summary == "SUMMARY: the user asked to remember PELICAN; echo one printed one."
    assert (p.summary_model, p.usage.input_tokens, p.usage.output_tokens) == (MODEL, 900, 21)
    assert compaction.actor == f"agent:{MODEL}" and p.tokens_before > p.tokens_after
    # Both figures are the API's counts (issue 15), asked through the SDK's count_tokens.
    assert (p.tokens_before, p.tokens_after) == counts_around_the_summary(api)
    assert (p.tokens_before_source, p.tokens_after_source) == ("count_tokens", "count_tokens")
    # The next request: the system prompt whole, the summary first, the recent exchange verbatim.
    last = bodies[3]
    assert _text(last["system"]).startswith(SYSTEM)
    assert last["messages"][0]["content"][0]["text"].startswith("[Summary of earlier conversation]\nSUMMARY:")
    kept = {block.get("id") for m in last["messages"] for block in m["content"]}
    assert {"toolu_one", "toolu_two"} <= kept
    assert TASK not in str(last["messages"])
    assert first_divergence(events, tool_schemas()) is None
    cost = session_cost(sid, events)  # the summary call counts as a model call, with its usage
    turns = [e.payload.usage for e in events if e.type == "model_turn"]
    assert cost.model_calls == len(turns) + 1
    assert cost.tokens["input_tokens"] == sum(u.input_tokens for u in turns) + 900
    assert [(c.tokens_before, c.tokens_after) for c in cost.compactions] == [(p.tokens_before, p.tokens_after)]


def _text(system: str | list[dict]) -> str:
    """A request's system prompt: text, or (with prompt caching, issue 15) text blocks."""
    return system if isinstance(system, str) else "".join(block["text"] for block in system)


async def test_the_apis_count_compacts_a_session_the_estimate_would_not_and_it_replays_cleanly():
    # A window where characters / 4 of the prompt stays under 3/4 while the API's count,
    # which also sees the tools, is over it.
    window = 2048
    sid, events, api = await compacting_session(window)
    [compaction] = [e for e in events if e.type == "compaction"]
    p = compaction.payload
    before = fold([e for e in events if e.seq < compaction.seq])
    assert estimate_tokens(build_request(before, tool_schemas())) < window * 3 // 4 <= p.tokens_before
    assert (p.tokens_before, p.tokens_after) == counts_around_the_summary(api)
    assert p.tokens_before_source == "count_tokens" and p.summary_model == MODEL
    assert p.summary.startswith("SUMMARY:") and len(api.bodies()) == 4  # written by the model
    assert first_divergence(events, tool_schemas()) is None
