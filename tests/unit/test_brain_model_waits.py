"""An unavailable model parks the turn `waiting_model` and the actor calls again after its
backoff or on a wake; the brain bounds its concurrent model calls; deltas go to the sink,
not the log. The actor over a real `PartitionWriter` whose producer is a `FakeProducer`
(`test_brain_actor`); with real Kafka, Postgres and the Messages API server:
tests/e2e/test_claude_stack.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

from tests.unit.actor_partition import Partition, create, run_until_idle
from wakeline.contract import commands as c
from wakeline.contract.deltas import ModelDelta
from wakeline.runtime.fair_slots import FairSlots
from wakeline.agent.context import estimate_tokens
from wakeline.log.fold import fold
from wakeline.agent.model import ModelError, ModelReply, ModelRequest


class FlakyModel:
    """Fails `failures` times with a passing cause, then answers; counts calls in flight."""

    name = "fake"
    streams = True

    def __init__(self, failures: int, delay_s: float = 0.0, retryable: bool = True):
        self.failures, self.delay_s, self.retryable = failures, delay_s, retryable
        self.calls = 0
        self.in_flight = self.most_in_flight = 0

    async def complete(self, request: ModelRequest, on_delta=None) -> ModelReply:
        self.calls += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
            if on_delta is not None:
                await on_delta("text", "do")
                await on_delta("text", "ne")
            if self.calls <= self.failures:
                raise ModelError("OverloadedError: Error code: 529", retryable=self.retryable)
            return ModelReply(text="done", blocks=[{"type": "text", "text": "done"}])
        finally:
            self.in_flight -= 1


def with_deps(actor, **changes):
    actor.deps = dataclasses.replace(actor.deps, **changes)
    return actor


async def test_overload_parks_the_turn_and_it_completes_after_the_backoff() -> None:
    part = Partition()
    await part.writer.start()
    try:
        model = FlakyModel(failures=2)
        actor = with_deps(part.actor("s1", model), model_retry_s=0.05, model_retry_max_s=0.1, idle_evict_s=0.5)
        part.deliver(actor, create("s1"))
        await run_until_idle(actor)
    finally:
        await part.writer.close()
    events = part.events("s1")
    types = [ev.type for ev in events]
    waits = [ev.payload for ev in events if ev.type == "model_unavailable"]
    assert [(w.attempt, w.retry_in_s) for w in waits] == [(1, 0.05), (2, 0.1)]
    assert "529" in waits[0].error
    assert types.count("model_turn") == 1 and types[-1] == "session_ended"
    assert events[-1].payload.reason == "completed"  # not ended by the overload
    assert model.calls == 3


async def test_a_refused_request_still_ends_the_session_with_error() -> None:
    part = Partition()
    await part.writer.start()
    try:
        actor = part.actor("s1", FlakyModel(failures=1, retryable=False))
        part.deliver(actor, create("s1"))
        await run_until_idle(actor)
    finally:
        await part.writer.close()
    events = part.events("s1")
    assert "model_unavailable" not in [ev.type for ev in events]
    assert (events[-1].type, events[-1].payload.reason) == ("session_ended", "error")


async def test_a_wake_calls_the_model_at_once_instead_of_after_the_backoff() -> None:
    part = Partition()
    await part.writer.start()
    try:
        model = FlakyModel(failures=1)
        actor = with_deps(part.actor("s1", model), model_retry_s=3600, model_retry_max_s=3600, idle_evict_s=0.5)
        part.deliver(actor, create("s1"))
        run = asyncio.create_task(actor.run("test"))
        async with asyncio.timeout(10):
            while not any(ev.type == "model_unavailable" for ev in part.events("s1")):
                await asyncio.sleep(0.02)
        assert fold(part.events("s1")).status == "waiting_model"
        part.deliver(actor, c.WakeSession(command_id=f"wake-{uuid.uuid4()}", session_id="s1", tenant="t",
                                          actor="user:ann"))
        await asyncio.wait_for(run, timeout=10)  # an hour's backoff: only the wake can end it in time
    finally:
        await part.writer.close()
    events = part.events("s1")
    assert [ev.type for ev in events][-1] == "session_ended" and events[-1].payload.reason == "completed"
    assert model.calls == 2


async def test_model_calls_are_bounded_across_sessions_and_deltas_stay_out_of_the_log() -> None:
    part = Partition()
    await part.writer.start()
    slots = FairSlots(2)
    model = FlakyModel(failures=0, delay_s=0.05)
    deltas: list[ModelDelta] = []

    async def publish(delta: ModelDelta) -> None:
        deltas.append(delta)
    try:
        actors = [with_deps(part.actor(f"s{i}", model), model_slots=slots, publish_delta=publish)
                  for i in range(6)]
        for i, actor in enumerate(actors):
            part.deliver(actor, create(f"s{i}"))
        await asyncio.gather(*(run_until_idle(a) for a in actors))
    finally:
        await part.writer.close()
    assert model.calls == 6 and model.most_in_flight == 2
    seen = sorted((d.session_id, d.turn, d.index, d.kind, d.text) for d in deltas)
    assert seen == sorted((f"s{i}", 1, n, kind, text) for i in range(6)
                          for n, (kind, text) in enumerate([("start", ""), ("text", "do"), ("text", "ne")]))
    assert len({d.call for d in deltas}) == 6
    for i in range(6):
        events = part.events(f"s{i}")
        assert events[-1].payload.reason == "completed"
        assert "done" not in [getattr(ev.payload, "text", None) for ev in events if ev.type != "model_turn"]


class CountingModel(FlakyModel):
    """A model with the API's token count (as `ClaudeModel.count_tokens`)."""

    def __init__(self, counted: int | None):
        super().__init__(failures=0)
        self.counted, self.counts = counted, 0

    async def count_tokens(self, request: ModelRequest) -> int:
        self.counts += 1
        if self.counted is None:
            raise ModelError("APIConnectionError: gone", retryable=True)
        return self.counted


def long_session(window: int = 2048):
    """A session whose local estimate is past half its window but short of the 3/4 that compacts."""
    from tests.unit.folded_log import Log
    from wakeline.contract.tools import tool_schemas
    from wakeline.agent.context import build_request
    from wakeline.agent.inputs import handle_input
    from wakeline.agent.steps import model_drafts, next_step
    from wakeline.agent.model import ToolUse
    log = Log()
    log.append(handle_input(log.state, c.CreateSession(
        command_id="create-1", session_id="s1", tenant="t", actor="user:ann", message="go",
        config={"model": "fake", "context_window": window})), "s1")
    log.append(next_step(log.state), "s1")
    for i in range(6):
        log.append(model_drafts(log.state, ModelReply(text="x" * 100, tool_uses=[
            ToolUse(id=f"tc-{i}", name="list_files", input={})]), "agent:fake"), "s1")
        log.append(handle_input(log.state, c.ToolResultReport(
            session_id="s1", tenant="t", tool_call_id=f"tc-{i}", name="list_files", output="y" * 300,
            runner="r")), "s1")
    request = build_request(log.state, tool_schemas())
    assert estimate_tokens(request) < window * 3 // 4  # the estimate alone would not compact
    return log.state, request


async def test_the_api_token_count_decides_compaction_and_the_estimate_stands_without_it() -> None:
    part = Partition()
    state, request = long_session()
    assert estimate_tokens(request) >= 2048 // 2  # near enough the threshold for a count
    over = CountingModel(counted=5000)
    compaction = await part.actor("s1", over).compaction_counts.counted_compaction(over, state, request)
    assert compaction is not None and compaction.payload.tokens_before == 5000  # the API's figure
    assert compaction.payload.resets_prompt_cache

    under = CountingModel(counted=100)
    assert await part.actor("s1", under).compaction_counts.counted_compaction(under, state, request) is None
    down = CountingModel(counted=None)
    down_counts = part.actor("s1", down).compaction_counts
    assert await down_counts.counted_compaction(down, state, request) is None  # the estimate stands
    assert (over.counts, under.counts, down.counts) == (1, 1, 1)

    small_state, small_request = long_session(window=8192)  # far from the window: no count is asked
    idle = CountingModel(counted=10**6)
    assert await part.actor("s1", idle).compaction_counts.counted_compaction(idle, small_state, small_request) is None
    assert idle.counts == 0


async def test_a_model_that_does_not_stream_publishes_no_deltas() -> None:
    part = Partition()
    await part.writer.start()
    model = FlakyModel(failures=0)
    model.streams = False  # as the scripted model: nothing to show while it "writes"
    deltas: list[ModelDelta] = []

    async def publish(delta: ModelDelta) -> None:
        deltas.append(delta)
    try:
        actor = with_deps(part.actor("s1", model), publish_delta=publish)
        part.deliver(actor, create("s1"))
        await run_until_idle(actor)
    finally:
        await part.writer.close()
    assert model.calls == 1 and deltas == []
    assert part.events("s1")[-1].payload.reason == "completed"


async def test_the_summary_call_of_a_compaction_takes_a_model_slot_like_a_turn() -> None:
    from wakeline.agent.context import TokenCount, plan_compaction
    part = Partition()
    state, request = long_session()
    plan = plan_compaction(state, request, TokenCount(5000, "count_tokens"))  # one the model summarizes
    assert plan is not None
    model = FlakyModel(failures=0, delay_s=0.1)
    slots = FairSlots(1)
    summarizing = with_deps(part.actor("s1", model), model_slots=slots)
    turning = with_deps(part.actor("s2", model), model_slots=slots)

    _, turn_done = await asyncio.gather(summarizing.model_driver.summarize(state, plan),
                                         turning.model_driver.answer(state))

    assert model.calls == 2 and model.most_in_flight == 1  # one slot: one call at a time, the summary's too
    summary_done = summarizing.mailbox.get_nowait()
    assert summary_done.compaction.payload.summary == "done"  # the model's summary, not the mechanical one
    assert turn_done.reply is not None and turn_done.error is None
