"""The session's memory file at a compaction (issue 11): read by the brain through a recorded
`read_file` call, re-injected whole after the summary, invisible to the model as a tool_use.

A session is driven here through the brain's pure decision code (`next_step`,
`plan_compaction`, `compaction_step`, `model_drafts`) with scripted replies and a runner
that answers every call; the log it leaves is then folded, rendered and replay-checked.
"""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from tests.factories import draft, sealed
from wakeline.contract import events as e
from wakeline.log.chain import Draft, canonical_json
from wakeline.log.fold import fold
from wakeline.contract.tools import tool_schemas
from wakeline.agent.context import build_request, plan_compaction
from wakeline.agent.memory import compaction_step, memory_content
from wakeline.agent.model import ModelReply, ToolUse
from wakeline.agent.replay_check import first_divergence
from wakeline.agent.steps import CALL_MODEL, model_drafts, next_step
from wakeline.agent.summary import just_compacted

TOOLS = tool_schemas()
MEMORY = "# MEMORY\n- the build needs `make gen` first\n- user wants tabs, not spaces\n" + "note " * 40
SID = "sess-memory"


def _reply(turn: int) -> ModelReply:
    if turn == 1:
        use = ToolUse(id="tc-w", name="write_file", input={"path": "MEMORY.md", "content": MEMORY})
        return ModelReply(text="Noting what matters.", tool_uses=[use], stop_reason="tool_use")
    if turn <= 8:
        use = ToolUse(id=f"tc-{turn}", name="bash", input={"command": f"seq {turn} 400"})
        return ModelReply(text=f"step {turn}", tool_uses=[use], stop_reason="tool_use")
    return ModelReply(text="done", stop_reason="end_turn")


def _runner(call: e.ToolCallPayload, memory_present: bool) -> Draft:
    if call.name == "read_file":
        if memory_present:
            output = json.dumps({"path": "MEMORY.md", "content": MEMORY, "size": len(MEMORY), "offset": 0,
                                 "truncated": False})
            return draft("tool_result", f"result:{call.tool_call_id}", tool_call_id=call.tool_call_id,
                         name="read_file", output=output, duration_ms=3)
        return draft("tool_result", f"result:{call.tool_call_id}", tool_call_id=call.tool_call_id, name="read_file",
                     output=json.dumps({"error_kind": "not_found", "message": "no such file"}), is_error=True,
                     error_kind="not_found", duration_ms=3)
    output = "x" * 900 if call.name == "bash" else json.dumps({"path": "MEMORY.md", "bytes": len(MEMORY)})
    return draft("tool_result", f"result:{call.tool_call_id}", tool_call_id=call.tool_call_id, name=call.name,
                 output=output, duration_ms=3)


def drive(memory_file: str | None = "MEMORY.md", memory_present: bool = True, stop_after_memory_call: bool = False,
          log: list[e.Event] | None = None) -> list[e.Event]:
    """The log a brain and a runner leave for one task; `stop_after_memory_call` cuts it
    right after the brain's read is recorded (a brain killed before its result)."""
    if log is None:
        config = {"context_window": 1024, "max_tokens": 256, "max_turns": 5}
        if memory_file is not None:
            config["memory_file"] = memory_file
        log = sealed([draft("session_created", "cmd-create", config=config, owner="user:alice"),
                      draft("user_message", "cmd-1", text="Do the task and keep notes in MEMORY.md.")], SID)
    replies = 0
    while len(log) < 400:
        state = fold(log)
        step = next_step(state)
        if step is None:
            if not state.pending_tool_calls:
                return log
            drafts = [_runner(state.pending_tool_calls[0], memory_present)]  # the runner answers
        elif step is CALL_MODEL:
            plan = None if just_compacted(state) else plan_compaction(state, build_request(state, TOOLS))
            if plan is not None:
                drafts = [compaction_step(state, plan)]
                if stop_after_memory_call and drafts[0].type == "tool_call":
                    return log + sealed(drafts, SID, after=log[-1])
            else:
                replies += 1
                drafts = model_drafts(state, _reply(replies), "agent:scripted:default")
        else:
            drafts = step
        log = log + sealed(drafts, SID, after=log[-1])
    raise AssertionError("the session did not settle")


def _compactions(log):
    return [ev for ev in log if isinstance(ev, e.ContextCompacted)]


def _memory_calls(log):
    return [ev for ev in log if isinstance(ev, e.ToolCallRequested) and ev.actor == "system:brain"]


def test_a_compaction_re_reads_the_memory_file_and_puts_it_whole_right_after_the_summary():
    log = drive()
    compactions, calls = _compactions(log), _memory_calls(log)
    assert compactions and len(calls) == len(compactions)
    first = compactions[0]
    # the brain's read, then the runner's result, then the compaction with the content
    call_at = next(i for i, ev in enumerate(log) if ev is calls[0])
    assert calls[0].payload.name == "read_file" and calls[0].payload.input["path"] == "MEMORY.md"
    assert isinstance(log[call_at + 1], e.ToolResultReceived)
    assert log[call_at + 2] is first
    assert first.payload.memory_file == "MEMORY.md" and first.payload.memory == MEMORY
    state = fold(log[:call_at + 3])
    request = build_request(state, TOOLS)
    opening = request.messages[0]
    assert opening["role"] == "user"
    assert opening["content"][0]["text"].startswith("[Summary of earlier conversation]")
    assert opening["content"][1]["text"] == f'<memory_file path="MEMORY.md" trust="data">\n{MEMORY}\n</memory_file>'


def test_the_brains_read_never_reaches_the_model_as_a_tool_use_and_every_tool_use_keeps_its_result():
    log = drive()
    memory_ids = {ev.payload.tool_call_id for ev in _memory_calls(log)}
    for upto in range(2, len(log) + 1):
        request = build_request(fold(log[:upto]), TOOLS)
        uses = [b["id"] for m in request.messages for b in m["content"] if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for m in request.messages for b in m["content"] if b["type"] == "tool_result"]
        assert not memory_ids & (set(uses) | set(results))
        assert set(results) <= set(uses)  # a result without its tool_use is what the API refuses


def test_a_missing_memory_file_compacts_without_memory_and_the_session_goes_on():
    log = drive(memory_present=False)
    compactions = _compactions(log)
    assert compactions and all(c.payload.memory is None and c.payload.memory_file is None for c in compactions)
    assert "memory" not in compactions[0].payload.model_dump(mode="json")
    assert isinstance(log[-1], e.SessionEnded)
    assert first_divergence(log, TOOLS) is None


def test_without_a_memory_file_nothing_is_read_and_compactions_are_as_before():
    log = drive(memory_file=None)
    assert _compactions(log) and not _memory_calls(log)


def test_a_brain_killed_between_its_read_and_the_result_wakes_waiting_and_records_one_compaction():
    cut = drive(stop_after_memory_call=True)
    assert cut[-1].type == "tool_call" and cut[-1].actor == "system:brain"
    woken = fold(cut)  # what a new owner folds: the call is pending (re-issued), the model waits
    assert next_step(woken) is None
    assert [c.tool_call_id for c in woken.pending_tool_calls] == [cut[-1].payload.tool_call_id]
    log = drive(log=cut)
    assert len(_memory_calls(log)) == len(_compactions(log))
    after = log[len(cut):]
    assert isinstance(after[0], e.ToolResultReceived) and isinstance(after[1], e.ContextCompacted)
    assert after[1].payload.memory == MEMORY


def test_sessions_with_memory_reads_replay_cleanly():
    log = drive()
    assert _memory_calls(log)
    assert first_divergence(log, TOOLS) is None


def test_replay_check_finds_a_brain_that_no_longer_reads_the_memory_file(monkeypatch):
    from wakeline.agent import replay_check
    log = drive()
    monkeypatch.setattr(replay_check, "compaction_step", lambda state, plan: plan)
    found = first_divergence(log, TOOLS)
    assert found is not None and found.seq == _memory_calls(log)[0].seq
    assert found.recorded.startswith("tool_call by system:brain") and "would record compaction" in found.now


def test_memory_content_takes_the_files_text_or_none():
    ok = json.dumps({"path": "M.md", "content": "abc", "size": 3, "offset": 0, "truncated": False})
    assert memory_content(ok, False) == "abc"
    assert memory_content(ok, True) is None
    assert memory_content("not json", False) is None
    cut = json.dumps({"path": "M.md", "content": "abc", "size": 999999, "offset": 0, "truncated": True})
    assert memory_content(cut, False).startswith("abc\n[truncated")


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "a/../../b", "a//b", "./M.md", "", "a\\b", "a\0b"])
def test_a_memory_file_outside_the_work_dir_is_refused(path):
    with pytest.raises(ValidationError):
        e.SessionConfig(memory_file=path)


def test_a_memory_file_inside_the_work_dir_is_taken_and_no_memory_file_keeps_the_configs_bytes():
    assert e.SessionConfig(memory_file="notes/MEMORY.md").memory_file == "notes/MEMORY.md"
    assert "memory_file" not in e.SessionConfig().model_dump(mode="json")
    before = e.CompactionPayload(summary="s", covered_from_seq=1, covered_to_seq=2, tokens_before=9, tokens_after=3)
    assert canonical_json(before.model_dump(mode="json")) == canonical_json(
        {"summary": "s", "covered_from_seq": 1, "covered_to_seq": 2, "tokens_before": 9, "tokens_after": 3})


def test_a_read_whose_session_was_cancelled_is_never_re_used_by_a_later_turns_compaction():
    cut = drive(stop_after_memory_call=True)
    call = cut[-1].payload
    later = cut + sealed([draft("session_ended", "cmd-cancel", actor="user:alice", reason="cancelled"),
                          _runner(call, memory_present=True)], SID, after=cut[-1])
    state = fold(later)
    assert state.memory_call is None and state.memory_read is not None and not state.pending_tool_calls
    assert all(call.tool_call_id not in str(m) for m in build_request(state, TOOLS).messages)
    later += sealed([draft("user_message", "cmd-2", text="go on"), draft("turn_started", turn=state.turns + 1)],
                    SID, after=later[-1])
    state = fold(later)
    assert state.memory_read is None and next_step(state) is CALL_MODEL
    plan = plan_compaction(state, build_request(state, TOOLS))
    assert plan is not None and compaction_step(state, plan).type == "tool_call"  # read afresh
