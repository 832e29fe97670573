"""The model's own token count decides a Claude session's compaction (issues 11, 15): the
actor asks the count (`count_tokens`) once the request nears the window by the estimate or by
the newest turn's usage, the count compacts where the estimate would not and vetoes where
the estimate would, a counted compaction is written by the model like any other, both of
its token figures are counted, a failed count leaves the estimate to decide, and every such
session replays cleanly (the check re-plans with the recorded count). The actor over a real
`PartitionWriter` whose producer is a `FakeProducer`; through the real SDK:
tests/integration/test_model_compaction.py.
"""

from __future__ import annotations

import json
import uuid
from typing import Callable

from tests.fakes.archive import GROUP
from tests.unit.actor_partition import Partition, run_until_idle
from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.contract.tools import tool_schemas
from wakeline.contract.topics import TOOL_RESULTS
from wakeline.agent.context import estimate_tokens
from wakeline.agent.model import ModelError, ModelReply, ModelRequest, ToolUse
from wakeline.agent.replay_check import first_divergence
from wakeline.agent.summary import SUMMARY_SYSTEM

MODEL = "claude-fake"
SUMMARY = "SUMMARY: the user asked for six listings; each printed y."


class CountingClaude:
    """Answers as a Claude model would: a tool call per reply for `rounds` replies, then
    done; a summary when asked for one; `count(request)` as the API's token count (None:
    the count fails)."""

    name = MODEL

    def __init__(self, count: Callable[[ModelRequest], int] | None, rounds: int = 6,
                 usage: e.Usage = e.Usage(input_tokens=10, output_tokens=5)):
        self.count, self.rounds, self.usage = count, rounds, usage
        self.calls: list[ModelRequest] = []
        self.summaries: list[ModelRequest] = []
        self.counts: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, on_delta=None) -> ModelReply:
        if request.system == SUMMARY_SYSTEM:
            self.summaries.append(request)
            return ModelReply(text=SUMMARY, usage=e.Usage(input_tokens=40, output_tokens=6))
        self.calls.append(request)
        if len(self.calls) <= self.rounds:
            use = ToolUse(id=f"tc-{len(self.calls)}", name="list_files", input={})
            return ModelReply(text="x" * 100, tool_uses=[use], usage=self.usage, stop_reason="tool_use")
        return ModelReply(text="done", usage=self.usage)

    async def count_tokens(self, request: ModelRequest) -> int:
        self.counts.append(request)
        if self.count is None:
            raise ModelError("APIConnectionError: gone", retryable=True)
        return self.count(request)


class EstimatingModel(CountingClaude):
    """The same replies from a model without a count: the estimate decides."""

    count_tokens = None  # type: ignore[assignment]


def summarized(request: ModelRequest) -> bool:
    return "[Summary of earlier conversation]" in str(request.messages[0])


async def drive(model: CountingClaude, window: int, memory: str | None = None,
                result_chars: int = 300) -> list[e.Event]:
    """One session: `model.rounds` tool rounds (each result `result_chars` characters), to its end;
    with `memory`, a MEMORY.md the runner reads back with that content."""
    part, sid = Partition(), f"s-{uuid.uuid4().hex[:8]}"
    config: dict = {"model": MODEL, "context_window": window} | ({"memory_file": "MEMORY.md"} if memory else {})
    await part.writer.start()
    try:
        actor = part.actor(sid, model)
        part.deliver(actor, c.CreateSession(command_id=f"create-{uuid.uuid4()}", session_id=sid, tenant="t",
                                            actor="user:ann", message="list the files six times", config=config))
        await run_until_idle(actor)
        for i in range(1, model.rounds + 1):
            result = c.ToolResultReport(session_id=sid, tenant="t", tool_call_id=f"tc-{i}", name="list_files",
                                        output="y" * result_chars, runner="r1")
            part.deliver(actor, result, TOOL_RESULTS)
            await run_until_idle(actor)
        reads = [ev for ev in part.events(sid) if ev.type == "tool_call" and ev.actor == "system:brain"]
        for read in reads:  # the brain's read of the memory file, answered as a runner would
            output = json.dumps({"path": "MEMORY.md", "content": memory, "size": len(memory or ""), "offset": 0,
                                 "truncated": False})
            part.deliver(actor, c.ToolResultReport(session_id=sid, tenant="t", tool_call_id=read.payload.tool_call_id,
                                                   name="read_file", output=output, runner="r1"), TOOL_RESULTS)
            await run_until_idle(actor)
    finally:
        await part.writer.close()
    events = part.events(sid)
    assert events[-1].type == "session_ended" and events[-1].payload.reason == "completed"
    return events


def compactions(events: list[e.Event]) -> list[e.ContextCompacted]:
    return [ev for ev in events if isinstance(ev, e.ContextCompacted)]


async def test_a_compaction_the_count_asks_for_is_written_by_the_model_and_replays_cleanly() -> None:
    # The count: over the window once all six rounds are in, small after the compaction.
    model = CountingClaude(lambda r: 200 if summarized(r) else (5000 if len(r.messages) >= 13 else 300))
    events = await drive(model, window=2048)

    assert first_divergence(events, tool_schemas()) is None  # re-planned with the recorded count
    [compaction] = compactions(events)
    p = compaction.payload
    counted = next(r for r in model.counts if len(r.messages) >= 13 and not summarized(r))
    assert estimate_tokens(counted) < 2048 * 3 // 4  # the estimate alone would not have compacted
    assert (p.tokens_before, p.tokens_before_source) == (5000, "count_tokens")
    assert (p.tokens_after, p.tokens_after_source) == (200, "count_tokens")  # the count of what is left
    assert compaction.actor == f"agent:{MODEL}" and (p.summary, p.summary_model) == (SUMMARY, MODEL)
    assert p.usage == e.Usage(input_tokens=40, output_tokens=6) and len(model.summaries) == 1
    assert summarized(model.calls[-1]) and SUMMARY in str(model.calls[-1].messages[0])

    # The check decides with the recorded count: a log that recorded a small one diverges there.
    changed = [ev.model_copy(update={"payload": p.model_copy(update={"tokens_before": 100})})
               if ev.seq == compaction.seq else ev for ev in events]
    found = first_divergence(changed, tool_schemas())
    assert found is not None and found.seq == compaction.seq
    assert found.now == "would call the model (no compaction)"


async def test_the_count_vetoes_a_compaction_the_estimate_would_make() -> None:
    window = 1400
    estimating = EstimatingModel(count=None)
    [by_estimate] = compactions(await drive(estimating, window))
    assert by_estimate.payload.tokens_before >= window * 3 // 4  # the estimate compacts this session

    model = CountingClaude(lambda r: 300)  # the model's count: far from the window
    events = await drive(model, window)
    assert compactions(events) == [] and model.summaries == [] and model.counts
    assert first_divergence(events, tool_schemas()) is None


async def test_a_failed_count_leaves_the_estimate_to_decide() -> None:
    window = 1400
    model = CountingClaude(count=None)
    events = await drive(model, window)
    [compaction] = compactions(events)
    p = compaction.payload
    assert model.counts and p.tokens_before_source == "estimate" and p.tokens_after_source == "estimate"
    assert p.tokens_before >= window * 3 // 4 and p.summary_model == MODEL  # still written by the model
    assert first_divergence(events, tool_schemas()) is None


async def test_the_last_turns_usage_asks_for_a_count_the_estimate_would_not() -> None:
    # Replies whose usage says the context is large (what characters / 4 misses: tools, say),
    # in a window where the estimate stays under half: the usage is what asks the count.
    window = 8192
    model = CountingClaude(lambda r: 200 if summarized(r) else (7000 if len(r.messages) >= 13 else 500),
                           usage=e.Usage(input_tokens=4000, cache_read_input_tokens=2500, output_tokens=40))
    events = await drive(model, window)
    assert all(estimate_tokens(r) < window // 2 for r in model.calls)
    [compaction] = compactions(events)
    assert (compaction.payload.tokens_before, compaction.payload.tokens_before_source) == (7000, "count_tokens")
    assert first_divergence(events, tool_schemas()) is None

    quiet = CountingClaude(lambda r: 7000)  # the same session with small usage: no count is asked
    assert compactions(await drive(quiet, window)) == [] and quiet.counts == []


async def test_a_counted_compaction_reads_the_memory_file_first_and_records_the_count_that_decided_it() -> None:
    model = CountingClaude(lambda r: 200 if summarized(r) else (5000 if len(r.messages) >= 13 else 300))
    events = await drive(model, window=2048, memory="- the code word is PELICAN\n")
    [read] = [ev for ev in events if ev.type == "tool_call" and ev.actor == "system:brain"]
    [compaction] = compactions(events)
    p = compaction.payload
    assert read.seq < compaction.seq and p.memory == "- the code word is PELICAN\n" and p.summary_model == MODEL
    assert (p.tokens_before, p.tokens_before_source, p.tokens_after_source) == (5000, "count_tokens", "count_tokens")
    # counted once for the decision (the read left the request as it was), once for what is left
    assert [len(r.messages) >= 13 and not summarized(r) for r in model.counts].count(True) == 1
    assert "PELICAN" in str(model.calls[-1].messages[0])  # re-injected after the summary
    assert first_divergence(events, tool_schemas()) is None


async def test_a_brain_woken_right_after_a_compaction_calls_the_model_rather_than_compact_again() -> None:
    # A count that stays over the window after the compaction: the running brain calls the
    # model with what is left. A brain killed once the compaction committed and woken by
    # another owner (a `woke` event after it) must do the same: "compacted just now" is in
    # the log (`SessionState.fresh_compaction`), not in the brain that wrote it.
    def count(r: ModelRequest) -> int:
        return 5000 if summarized(r) or len(r.messages) >= 13 else 300

    window = 1400  # what the compaction leaves is still past half of it by the estimate: worth a count
    events = await drive(CountingClaude(count), window, result_chars=900)
    [compaction] = compactions(events)
    cut = [ev for ev in events if ev.seq <= compaction.seq]  # the log as the killed brain left it

    part, woken = Partition(), CountingClaude(count)
    woken.calls = [None] * 6  # type: ignore[list-item]  # its six tool rounds were answered before the kill
    await part.writer.start()
    await part.archive.store.archive(GROUP, cut, {})  # the history a new owner loads
    try:
        await run_until_idle(part.actor(compaction.session_id, woken))
    finally:
        await part.writer.close()
    after = part.events(compaction.session_id)
    assert [ev.type for ev in after][:2] == ["woke", "model_turn"], [ev.type for ev in after]
    assert compactions(after) == [] and woken.summaries == [] and woken.counts == []
    assert summarized(woken.calls[-1]) and estimate_tokens(woken.calls[-1]) >= window // 2
    assert after[-1].type == "session_ended"
    assert first_divergence(cut + after, tool_schemas()) is None


async def test_a_model_without_a_count_gets_the_very_request_its_estimate_read(monkeypatch) -> None:
    # The estimate before each call and the call read one request, built once (issue 35: it
    # was built twice a step); the model gets the request the estimate decided on, and it is
    # `build_request`'s to the field, with `estimate_tokens`'s estimate.
    from wakeline.agent.context import build_request
    from wakeline.agent.context_cache import ContextCache

    built: list[tuple[ModelRequest, int]] = []
    build = ContextCache.build

    def building(self, state, tools):
        request, tokens = build(self, state, tools)
        assert request == build_request(state, tools) and tokens.tokens == estimate_tokens(request)
        built.append((request, tokens.tokens))
        return request, tokens

    monkeypatch.setattr(ContextCache, "build", building)
    model = EstimatingModel(count=None)
    await drive(model, window=200_000)
    assert len(model.calls) == model.rounds + 1 and model.summaries == []
    assert len(built) == len(model.calls)
    assert all(called is made for called, (made, _) in zip(model.calls, built))


async def test_a_session_out_of_its_turn_keeps_no_request_or_renderings() -> None:
    # A brain holds every session until idle eviction: what a model call's request is built
    # from is kept through a turn's steps, and dropped once the session waits for an input.
    part, sid = Partition(), f"s-{uuid.uuid4().hex[:8]}"
    model = EstimatingModel(count=None, rounds=2)
    await part.writer.start()
    try:
        actor = part.actor(sid, model)
        part.deliver(actor, c.CreateSession(command_id=f"create-{uuid.uuid4()}", session_id=sid, tenant="t",
                                            actor="user:ann", message="list the files twice", config={"model": MODEL}))
        await run_until_idle(actor)
        assert actor.state.pending_tool_calls and actor.compaction_counts.holding  # mid-turn: kept
        for i in (1, 2):
            part.deliver(actor, c.ToolResultReport(session_id=sid, tenant="t", tool_call_id=f"tc-{i}",
                                                   name="list_files", output="y", runner="r1"), TOOL_RESULTS)
            await run_until_idle(actor)
    finally:
        await part.writer.close()
    assert part.events(sid)[-1].type == "session_ended" and len(model.calls) == 3
    assert not actor.compaction_counts.holding
