"""Claude's turns in the log, purely: blocks kept as returned, the request rebuilt from them,
the event fields old logs lack, and what the brain does with each stop reason."""

from __future__ import annotations

import json
import uuid

import pytest
from pydantic import ValidationError

from tests.unit.folded_log import Log
from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.log.fold import fold
from wakeline.log.state_json import state_from_json, state_to_json
from wakeline.log.status import advance
from wakeline.contract.tools import tool_schemas
from wakeline.agent.context import build_request, plan_compaction
from wakeline.agent.inputs import handle_input
from wakeline.agent.model import ModelReply, ToolUse
from wakeline.agent.steps import CALL_MODEL, model_drafts, next_step

THINKING = {"type": "thinking", "thinking": "The user wants a listing.", "signature": "EqQBCkgIARABGAIiQL..."}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}


def create(**config) -> c.CreateSession:
    return c.CreateSession(command_id=f"create-{uuid.uuid4()}", session_id="s1", tenant="t", actor="user:ann",
                           message="list the files", config={"model": "claude-test", **config})


def started(**config) -> Log:
    log = Log()
    log.append(handle_input(log.state, create(**config)), "s1")
    log.append(next_step(log.state), "s1")  # turn_started
    assert next_step(log.state) is CALL_MODEL
    return log


def reply(blocks: list[dict], stop_reason: str = "tool_use") -> ModelReply:
    uses = [ToolUse(id=b["id"], name=b["name"], input=b["input"]) for b in blocks if b["type"] == "tool_use"]
    return ModelReply(text="\n".join(b["text"] for b in blocks if b["type"] == "text"), tool_uses=uses,
                      stop_reason=stop_reason, blocks=blocks,
                      reasoning=[b["thinking"] for b in blocks if b["type"] == "thinking"])


def result(log: Log, call_id: str, output: str = "a.txt") -> None:
    log.append(handle_input(log.state, c.ToolResultReport(session_id="s1", tenant="t", tool_call_id=call_id,
                                                          name="list_files", output=output, runner="r1")), "s1")


# --- 1. thinking, faithfully -------------------------------------------------------------

def test_thinking_blocks_go_back_exactly_as_returned_before_the_tool_results() -> None:
    log = started(thinking_budget=2048)
    blocks = [THINKING, REDACTED, {"type": "text", "text": "Listing."},
              {"type": "tool_use", "id": "toolu_1", "name": "list_files", "input": {"path": "."}}]
    log.append(model_drafts(log.state, reply(blocks), "agent:claude-test"), "s1")
    result(log, "toolu_1")

    request = build_request(log.state, tool_schemas())

    assert request.thinking_budget == 2048
    assert [m["role"] for m in request.messages] == ["user", "assistant", "user"]
    assert request.messages[1]["content"] == blocks  # same blocks, same order, tool_use once
    assert request.messages[2]["content"][0]["tool_use_id"] == "toolu_1"
    [turn] = [ev.payload for ev in log.events if ev.type == "model_turn"]
    assert turn.reasoning == ()  # the thinking is kept once, in the blocks
    assert e.reasoning_of(turn) == ("The user wants a listing.", "[redacted thinking]")


def test_the_rebuilt_request_is_the_same_after_a_wake_from_the_log_or_a_snapshot() -> None:
    log = started(thinking_budget=2048)
    blocks = [THINKING, {"type": "tool_use", "id": "toolu_1", "name": "list_files", "input": {}}]
    log.append(model_drafts(log.state, reply(blocks), "agent:claude-test"), "s1")
    result(log, "toolu_1")
    replayed = [e.parse_event(json.loads(json.dumps(ev.model_dump(mode="json")))) for ev in log.events]

    woken = fold(replayed)
    from_snapshot = state_from_json(json.loads(json.dumps(state_to_json(log.state))))

    live = build_request(log.state, tool_schemas())
    assert build_request(woken, tool_schemas()) == live
    assert build_request(from_snapshot, tool_schemas()) == live


def test_a_turn_recorded_before_blocks_existed_folds_as_text_and_tool_calls() -> None:
    log = started()
    old = e.ModelTurnPayload(text="Let me look.", stop_reason="tool_use", tool_call_ids=("tc-1",))
    call = e.ToolCallPayload(tool_call_id="tc-1", name="list_files", input={})
    from wakeline.log.chain import Draft
    log.append([Draft(payload=old, actor="agent:x", trust="instruction"),
                Draft(payload=call, actor="agent:x", trust="instruction")], "s1")

    content = build_request(log.state, tool_schemas()).messages[1]["content"]

    assert content == [{"type": "text", "text": "Let me look."},
                       {"type": "tool_use", "id": "tc-1", "name": "list_files", "input": {}}]


def test_new_fields_stay_out_of_the_dump_at_their_defaults_so_old_hashes_hold() -> None:
    assert e.ModelTurnPayload(text="x").model_dump() == {
        "text": "x", "reasoning": (), "usage": {"input_tokens": 0, "output_tokens": 0},
        "stop_reason": "end_turn", "tool_call_ids": ()}
    assert "thinking_budget" not in e.SessionConfig().model_dump()
    assert "resets_prompt_cache" not in e.CompactionPayload(
        summary="s", covered_from_seq=1, covered_to_seq=2, tokens_before=3, tokens_after=1).model_dump()
    cached = e.Usage(input_tokens=1, cache_read_input_tokens=5).model_dump()
    assert cached == {"input_tokens": 1, "output_tokens": 0, "cache_read_input_tokens": 5}


def test_thinking_budget_must_be_below_max_tokens() -> None:
    with pytest.raises(ValidationError, match="below max_tokens"):
        e.SessionConfig(max_tokens=2000, thinking_budget=2000)
    with pytest.raises(ValidationError):
        e.SessionConfig(thinking_budget=100)  # the API's floor is 1024
    assert e.SessionConfig(max_tokens=4096, thinking_budget=1024).thinking_budget == 1024


# --- 2. caching figures ---------------------------------------------------------------------

def test_usage_sums_cache_figures_and_compaction_says_it_resets_the_cache() -> None:
    log = started()
    usage = e.Usage(input_tokens=10, output_tokens=2, cache_creation_input_tokens=100, cache_read_input_tokens=0)
    log.append(model_drafts(log.state, ModelReply(text="a", usage=usage, blocks=[{"type": "text", "text": "a"}]),
                            "agent:claude-test"), "s1")
    assert log.state.usage.cache_creation_input_tokens == 100

    big = started(context_window=1024)
    for i in range(6):
        blocks = [{"type": "text", "text": "x" * 400},
                  {"type": "tool_use", "id": f"toolu_{i}", "name": "list_files", "input": {}}]
        big.append(model_drafts(big.state, reply(blocks), "agent:claude-test"), "s1")
        result(big, f"toolu_{i}", "y" * 400)
    compaction = plan_compaction(big.state, build_request(big.state, tool_schemas()))
    assert compaction is not None and compaction.payload.resets_prompt_cache is True


# --- 3. stop reasons --------------------------------------------------------------------------

def test_max_tokens_on_a_tool_use_turn_answers_the_cut_call_and_the_turn_goes_on() -> None:
    log = started()
    blocks = [{"type": "tool_use", "id": "toolu_ok", "name": "list_files", "input": {}},
              {"type": "tool_use", "id": "toolu_cut", "name": "write_file", "input": {"path": "a"}}]
    log.append(model_drafts(log.state, reply(blocks, "max_tokens"), "agent:claude-test"), "s1")

    assert [p.tool_call_id for p in log.state.pending_tool_calls] == ["toolu_ok"]  # the whole one runs
    cut = [ev for ev in log.events if ev.type == "tool_result"]
    assert [(r.payload.tool_call_id, r.payload.error_kind) for r in cut] == [("toolu_cut", "max_tokens")]
    assert "max_tokens" in json.loads(cut[0].payload.output)["message"]

    result(log, "toolu_ok")
    log.append(next_step(log.state), "s1")  # turn_ended
    assert log.events[-1].type == "turn_ended" and log.events[-1].payload.stop_reason == "max_tokens"
    assert [d.type for d in next_step(log.state)] == ["turn_started"]  # continued, not ended


def test_max_tokens_without_tools_ends_with_the_reason() -> None:
    log = started()
    log.append(model_drafts(log.state, reply([{"type": "text", "text": "a long ans"}], "max_tokens"), "a:x"), "s1")
    log.append(next_step(log.state), "s1")
    [ended] = next_step(log.state)
    assert ended.payload.reason == "completed" and "max_tokens" in ended.payload.detail


def test_refusal_is_recorded_as_such() -> None:
    log = started()
    log.append(model_drafts(log.state, reply([], "refusal"), "agent:claude-test"), "s1")
    assert log.events[-1].payload.stop_reason == "refusal"
    log.append(next_step(log.state), "s1")
    assert log.events[-1].payload.stop_reason == "refusal"  # turn_ended
    [ended] = next_step(log.state)
    assert "refused" in ended.payload.detail


def test_pause_turn_calls_the_model_again_with_the_paused_content() -> None:
    log = started()
    paused = [{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": "x"}},
              {"type": "text", "text": "Searching"}]
    log.append(model_drafts(log.state, reply(paused, "pause_turn"), "agent:claude-test"), "s1")

    assert next_step(log.state) is CALL_MODEL
    request = build_request(log.state, tool_schemas())
    assert request.messages[-1] == {"role": "assistant", "content": paused}  # the server tool's block too
    log.append(model_drafts(log.state, reply([{"type": "text", "text": "found it"}], "end_turn"), "a:x"), "s1")
    assert next_step(log.state) != CALL_MODEL


@pytest.mark.parametrize("name,tool_input,kind", [
    ("list_files", {"path": ".", "recursive": "very", "bogus": 1}, "invalid_input"),
    ("bash", {}, "invalid_input"),
    ("launch_missiles", {}, "unknown_tool"),
])
def test_a_tool_use_with_bad_input_gets_an_error_result_not_a_crash(name, tool_input, kind) -> None:
    log = started()
    blocks = [{"type": "tool_use", "id": "toolu_bad", "name": name, "input": tool_input},
              {"type": "tool_use", "id": "toolu_good", "name": "list_files", "input": {}}]
    log.append(model_drafts(log.state, reply(blocks), "agent:claude-test"), "s1")

    [bad] = [ev for ev in log.events if ev.type == "tool_result"]
    assert (bad.payload.tool_call_id, bad.payload.is_error, bad.payload.error_kind) == ("toolu_bad", True, kind)
    assert [p.tool_call_id for p in log.state.pending_tool_calls] == ["toolu_good"]


# --- 4. waiting for the model ----------------------------------------------------------------

def test_model_unavailable_parks_the_session_waiting_model_until_the_model_answers() -> None:
    log = started()
    from wakeline.log.chain import Draft
    wait = e.ModelUnavailablePayload(error="OverloadedError: 529", attempt=1, retry_in_s=2.0)
    log.append([Draft(payload=wait, actor="system:brain", trust="instruction")], "s1")
    assert (log.state.status, log.state.model_failures) == ("waiting_model", 1)
    assert next_step(log.state) is CALL_MODEL  # still the turn's model call: a wake makes it

    log.append(model_drafts(log.state, reply([{"type": "text", "text": "ok"}], "end_turn"), "a:x"), "s1")
    assert (log.state.status, log.state.model_failures) == ("running", 0)

    row = None
    statuses = []
    for ev in log.events:
        row = advance(row, ev)
        statuses.append(row.status)
    assert "waiting_model" in statuses and statuses[-1] == "running"
    assert statuses[[ev.type for ev in log.events].index("model_unavailable")] == "waiting_model"


def test_usage_reports_the_cache_hit_rate_and_what_caching_saved() -> None:
    usage = e.Usage(input_tokens=100, cache_creation_input_tokens=1000, cache_read_input_tokens=9000)
    assert usage.cache_hit_rate() == pytest.approx(9000 / 10100)
    assert usage.cache_saved_input_tokens() == pytest.approx(9000 * 0.9 - 1000 * 0.25)
    assert e.Usage().cache_hit_rate() == 0.0
    assert e.Usage(cache_creation_input_tokens=400).cache_saved_input_tokens() == -100  # written, never read


# --- 5. a fork's rebuilt request ------------------------------------------------------------------

def test_a_fork_of_a_thinking_session_rebuilds_the_request_the_api_expects() -> None:
    from tests.fakes.messages_api import _cache_control_problem, _thinking_problem
    from wakeline_brain.claude import ClaudeModel
    from wakeline.agent.forking import fork_drafts

    parent = started(thinking_budget=2048)
    blocks = [THINKING, REDACTED, {"type": "text", "text": "Listing."},
              {"type": "tool_use", "id": "toolu_1", "name": "list_files", "input": {"path": "."}}]
    parent.append(model_drafts(parent.state, reply(blocks), "agent:claude-test"), "s1")
    result(parent, "toolu_1")  # the fork starts here: after the result, before the model's answer
    at = parent.state.last_seq
    at_fork = build_request(parent.state, tool_schemas())
    parent.append(model_drafts(parent.state, reply([{"type": "text", "text": "a.txt"}], "end_turn"), "a:x"), "s1")

    fork = Log()
    fork.state, fork.events = fold(parent.events[:at]), list(parent.events[:at])
    cmd = c.CreateSession(command_id=f"create-{uuid.uuid4()}", session_id="s2", tenant="t", actor="user:ann",
                          message="now count them", fork_of=c.ForkOrigin(session_id="s1", seq=at))
    fork.append(fork_drafts(fork.state, parent.events[:at], cmd), "s2")
    fork.append(next_step(fork.state), "s2")  # the fork's first turn
    assert next_step(fork.state) is CALL_MODEL

    request = build_request(fork.state, tool_schemas())
    assert request.thinking_budget == 2048
    assert request.messages[1]["content"] == blocks  # thinking, signature and redacted data unchanged
    assert request.messages[:2] == at_fork.messages[:2]  # the prefix as the parent sent it from there
    last = request.messages[2]["content"]
    assert [b["type"] for b in last] == ["tool_result", "text"] and last[1]["text"] == "now count them"
    body = ClaudeModel("claude-test", "k", base_url="http://127.0.0.1:9").params(request)
    assert body["messages"][1]["content"][:2] == [THINKING, REDACTED]  # no cache mark on thinking
    assert _thinking_problem(body) is None and _cache_control_problem(body) is None  # what the API checks


# --- 6. blocks as stored ----------------------------------------------------------------------------

def test_a_text_block_with_citations_goes_back_as_it_came_and_a_plain_one_as_its_text() -> None:
    cited = {"type": "text", "text": "The sky is blue.", "citations": [
        {"type": "char_location", "cited_text": "blue", "document_index": 0, "document_title": "sky.txt",
         "start_char_index": 7, "end_char_index": 11}]}
    plain = {"type": "text", "text": "Plainly."}
    log = started()
    log.append(model_drafts(log.state, reply([cited, plain], "end_turn"), "agent:claude-test"), "s1")

    assert build_request(log.state, tool_schemas()).messages[1]["content"] == [cited, plain]
    from wakeline.log.state import TextBlock
    assert log.state.messages[1].blocks[1] == TextBlock("Plainly.")  # nothing kept twice for a plain one
    from wakeline.agent.context import _gist
    assert _gist(log.state.messages[1]) == "assistant: The sky is blue. | Plainly."  # summaries still read it
    from_snapshot = state_from_json(json.loads(json.dumps(state_to_json(log.state))))
    assert build_request(from_snapshot, tool_schemas()).messages[1]["content"] == [cited, plain]
