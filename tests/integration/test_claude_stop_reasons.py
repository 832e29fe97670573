"""Each stop reason through the real `anthropic` SDK and the brain's own actor: a session
actor (`actor_harness`) with `ClaudeModel` against the local Messages-API server, which
streams every reply. What the log records, and what the next request the server receives
carries: a reply cut at max_tokens mid tool call answers that call with an error result and
goes on; pause_turn is resumed with the paused content sent back; a refusal is recorded and
ends the session; a tool call whose input fails the tool's model gets an error result.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from actor_harness import INPUTS, Partition, eventually, run_until_idle
from tests.fakes.messages_api import (
    FakeMessagesAPI, cut_tool_use_block, message, server_tool_use_block, text_block, text_message, tool_use_block,
)
from wakeline.contract import commands as c
from wakeline.log.chain import first_broken_seq
from wakeline.contract.events import Event
from wakeline.contract.tools import tool_schemas
from wakeline.contract.topics import TOOL_RESULTS
from wakeline_brain.claude import ClaudeModel
from wakeline.agent.replay_check import first_divergence

MODEL = "claude-test-stops"


def bare(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Blocks without the brain's cache marks (where they sit is tests/e2e's concern)."""
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]


def results_in(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The request's tool_result blocks by the call they answer."""
    return {b["tool_use_id"]: b for m in body["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b["type"] == "tool_result"}


async def run_session(api: FakeMessagesAPI, *, answers: dict[str, str] | None = None) -> tuple[list[Event], list[Any]]:
    """One session, "do the task", to its end; `answers` are the runner's outputs for the
    tool calls the brain issues (by call id). The events and the request bodies."""
    model = ClaudeModel(MODEL, "test-key-not-real", base_url=api.base_url, max_retries=0)
    part, sid = Partition(), f"s-{uuid.uuid4().hex[:8]}"
    await part.writer.start()
    try:
        actor = part.actor(sid, model)
        part.deliver(actor, c.CreateSession(command_id=f"create-{uuid.uuid4()}", session_id=sid, tenant="t",
                                            actor="user:ann", message="do the task", config={"model": MODEL}))
        await run_until_idle(actor)
        for call_id, output in (answers or {}).items():
            offset = part.deliver(actor, c.ToolResultReport(session_id=sid, tenant="t", tool_call_id=call_id,
                                                            name="list_files", output=output, runner="r1"),
                                  TOOL_RESULTS)
            await run_until_idle(actor)
            await eventually(lambda: part.committed_offset(INPUTS[1]) == offset + 1)  # released
    finally:
        await part.writer.close()
        await model.close()
    events = part.events(sid)
    assert first_broken_seq(events) is None
    assert first_divergence(events, tool_schemas()) is None  # the replay check accepts the session
    return events, api.bodies()


def of(events: list[Event], kind: str) -> list[Any]:
    return [ev.payload for ev in events if ev.type == kind]


async def test_max_tokens_mid_tool_call_answers_the_cut_call_with_an_error_and_the_turn_goes_on() -> None:
    whole = tool_use_block("list_files", {"path": "."}, id="toolu_whole")
    cut = cut_tool_use_block("write_file", '{"path": "notes.txt", "content": "the first li', id="toolu_cut")
    with FakeMessagesAPI() as api:
        api.enqueue(message([text_block("Listing, then writing."), whole, cut], "max_tokens"),
                    text_message("Done, shorter this time."))
        events, bodies = await run_session(api, answers={"toolu_whole": "a.txt"})

    [first, second] = of(events, "model_turn")
    assert first.stop_reason == "max_tokens" and first.tool_call_ids == ("toolu_whole", "toolu_cut")
    calls = of(events, "tool_call")
    assert [p.tool_call_id for p in calls] == ["toolu_whole", "toolu_cut"]
    assert calls[1].input == {"path": "notes.txt"}  # what the SDK made of the cut JSON: never run as such
    results = {p.tool_call_id: p for p in of(events, "tool_result")}
    assert (results["toolu_cut"].is_error, results["toolu_cut"].error_kind) == (True, "max_tokens")
    assert results["toolu_whole"].is_error is False  # the whole call ran (the runner answered)
    assert [p.stop_reason for p in of(events, "turn_ended")] == ["max_tokens", "end_turn"]
    assert second.text == "Done, shorter this time."
    assert events[-1].type == "session_ended" and events[-1].payload.reason == "completed"

    assert len(bodies) == 2
    sent = bodies[1]["messages"]
    # the cut call goes back as the SDK made it of the cut input, answered by the error
    assert bare(sent[1]["content"])[:2] == [text_block("Listing, then writing."), whole]
    assert bare(sent[1]["content"])[2] == {"type": "tool_use", "id": "toolu_cut", "name": "write_file",
                                           "input": {"path": "notes.txt"}}
    answered = results_in(bodies[1])
    assert set(answered) == {"toolu_whole", "toolu_cut"} and answered["toolu_cut"]["is_error"] is True
    assert "max_tokens" in answered["toolu_cut"]["content"] and "a.txt" in answered["toolu_whole"]["content"]
    assert answered["toolu_whole"]["is_error"] is False


async def test_pause_turn_is_resumed_by_sending_the_paused_content_back() -> None:
    paused = [server_tool_use_block("web_search", {"query": "wakeline"}, id="srvtoolu_1"),
              text_block("Searching the web")]
    with FakeMessagesAPI() as api:
        api.enqueue(message(paused, "pause_turn"), text_message("Found it."))
        events, bodies = await run_session(api)

    assert [p.stop_reason for p in of(events, "model_turn")] == ["pause_turn", "end_turn"]
    assert list(of(events, "model_turn")[0].blocks) == paused  # the server tool's block kept whole
    types = [ev.type for ev in events]
    assert types.count("turn_started") == 1 and types.count("turn_ended") == 1  # one turn, resumed
    assert events[-1].type == "session_ended" and events[-1].payload.reason == "completed"
    assert len(bodies) == 2
    resumed = bodies[1]["messages"]
    assert [m["role"] for m in resumed] == ["user", "assistant"]  # ends on the paused turn
    assert bare(resumed[-1]["content"]) == paused
    assert bodies[1]["messages"][0] == bodies[0]["messages"][0]


async def test_a_refusal_is_recorded_as_such_and_ends_the_session() -> None:
    with FakeMessagesAPI() as api:
        api.enqueue(message([text_block("I can't help with that.")], "refusal"))
        events, bodies = await run_session(api)

    [turn] = of(events, "model_turn")
    assert (turn.stop_reason, turn.text) == ("refusal", "I can't help with that.")
    assert [p.stop_reason for p in of(events, "turn_ended")] == ["refusal"]
    ended = events[-1]
    assert ended.type == "session_ended" and ended.payload.reason == "completed"
    assert "refused" in ended.payload.detail
    assert len(bodies) == 1  # not asked again


async def test_a_tool_call_whose_input_fails_the_tool_model_gets_an_error_result_and_the_model_is_told() -> None:
    bad = tool_use_block("list_files", {"path": ".", "recursive": "very", "bogus": 1}, id="toolu_bad")
    with FakeMessagesAPI() as api:
        api.enqueue(message([bad], "tool_use"), text_message("Sorry, fixed."))
        events, bodies = await run_session(api)

    [result] = of(events, "tool_result")
    assert (result.tool_call_id, result.is_error, result.error_kind) == ("toolu_bad", True, "invalid_input")
    assert events[-1].type == "session_ended" and events[-1].payload.reason == "completed"
    assert len(bodies) == 2
    assert bare(bodies[1]["messages"][1]["content"]) == [bad]
    answered = results_in(bodies[1])["toolu_bad"]
    assert answered["is_error"] is True
    told = json.loads(answered["content"].split("\n", 1)[1].rsplit("\n", 1)[0])  # inside <tool_output>
    assert told["error_kind"] == "invalid_input" and "recursive" in told["message"] and "bogus" in told["message"]
