"""A session's budget as the brain decides it (`wakeline.agent.budget`, `steps`, `inputs`): pure.

Each test seals and folds drafts as the brain would (`folded_log.Log`), with no I/O: the
budget in force and what was spent against it come from the log alone.
"""

from __future__ import annotations

import uuid

import pytest

from tests.unit.folded_log import Log
from wakeline.agent.forking import fork_drafts
from wakeline.agent.inputs import handle_input
from wakeline.agent.model import ModelReply, ToolUse
from wakeline.agent.steps import CALL_MODEL, model_drafts, next_step
from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.contract.budget import Budget, Spent
from wakeline.contract.prices import DEFAULT_TABLE, ModelPrice, PriceTable
from wakeline.log.chain import Draft
from wakeline.log.fold import fold

SID = "s1"
SONNET = "claude-sonnet-4-5"
LIST = ToolUse(id="toolu_1", name="list_files", input={"path": "."})


def create(budget: dict | None = None, model: str = "scripted:x", prices: PriceTable = DEFAULT_TABLE) -> Log:
    config = {"model": model, **({"budget": budget} if budget else {})}
    log = Log()
    log.append(handle_input(log.state, c.CreateSession(command_id="create", session_id=SID, tenant="t",
                                                       actor="user:ann", message="go", config=config), prices), SID)
    return log


def step_on(log: Log) -> object:
    """Records the steps the session takes on its own; returns where it stops (CALL_MODEL or None)."""
    while isinstance(step := next_step(log.state), list) and step:
        log.append(step, SID)
    return step


def answer(log: Log, usage: e.Usage, *, tool: bool = True, stop_reason: str | None = None) -> object:
    """The model's reply with `usage` (asking for a tool call, answered by a runner, unless not
    `tool`), then the steps after it."""
    assert step_on(log) is CALL_MODEL
    reply = ModelReply(text="ok", usage=usage, tool_uses=[LIST] if tool else [],
                       stop_reason=stop_reason or ("tool_use" if tool else "end_turn"))
    log.append(model_drafts(log.state, reply, f"agent:{log.state.config.model}"), SID)
    if tool:
        log.append(handle_input(log.state, c.ToolResultReport(session_id=SID, tenant="t", tool_call_id=LIST.id,
                                                              name=LIST.name, output="a.txt", runner="r1")), SID)
    return step_on(log)


def message(log: Log, budget: dict | None = None, text: str = "more", prices: PriceTable = DEFAULT_TABLE
            ) -> list[Draft]:
    return handle_input(log.state, c.PostMessage(command_id=f"m-{uuid.uuid4()}", session_id=SID, tenant="t",
                                                 actor="user:ann", text=text, budget=budget), prices)


def ended(log: Log) -> e.SessionEndedPayload:
    last = log.events[-1]
    assert isinstance(last, e.SessionEnded), last.type
    return last.payload


@pytest.mark.parametrize("spent, stops", [(99, False), (100, True)])
def test_the_session_stops_before_its_next_model_call_once_a_cap_is_reached_exactly(spent, stops) -> None:
    log = create({"output_tokens": 100})
    where = answer(log, e.Usage(input_tokens=10, output_tokens=spent))
    if not stops:
        assert where is CALL_MODEL and log.events[-1].type == "turn_started"
        return
    assert where is None and log.state.status == "ended" and log.state.ended_reason == "budget"
    assert [ev.type for ev in log.events[-3:]] == ["tool_result", "turn_ended", "session_ended"]  # no new turn
    end = ended(log)
    assert end.budget == Budget(output_tokens=100)
    assert end.spent == Spent(input_tokens=10, output_tokens=100, usd=0.0)  # the scripted model costs nothing
    assert end.detail == "budget reached: output_tokens 100 of 100"


@pytest.mark.parametrize("read, stops", [(9_999_999, False), (10_000_000, True)])
def test_a_dollar_cap_is_held_at_the_price_the_log_bound_cache_reads_at_a_tenth(read, stops) -> None:
    log = create({"usd": 3}, model=SONNET)
    created = log.events[0].payload
    assert isinstance(created, e.SessionCreatedPayload) and created.price == DEFAULT_TABLE.price_for(SONNET)
    where = answer(log, e.Usage(cache_read_input_tokens=read))  # 0.30 $/Mtok: ten million is 3 dollars
    assert (where is None) == stops
    if stops:
        assert ended(log).spent == Spent(input_tokens=read, output_tokens=0, usd=3.0)
        assert ended(log).detail == "budget reached: usd 3 of 3"


def test_the_price_bound_at_creation_decides_whatever_the_table_says_later() -> None:
    cheap = PriceTable.with_overrides({SONNET: {"input_usd_per_mtok": 1, "output_usd_per_mtok": 5}})
    log = create({"usd": 2}, model=SONNET, prices=cheap)
    # a dollar at the bound price; the defaults' 3 dollars a million would have reached the cap
    assert answer(log, e.Usage(input_tokens=1_000_000)) is CALL_MODEL
    assert answer(log, e.Usage(input_tokens=1_000_000)) is None
    assert ended(log).spent == Spent(input_tokens=2_000_000, output_tokens=0, usd=2.0)


def test_a_dollar_cap_on_a_model_with_no_price_ends_the_session_before_its_first_model_call() -> None:
    log = create({"usd": 1}, model="claude-unknown")
    assert step_on(log) is None
    assert [ev.type for ev in log.events] == ["session_created", "user_message", "session_ended"]
    assert ended(log).spent == Spent(usd=None)
    assert "no price is known for claude-unknown" in (ended(log).detail or "")
    tokens_only = create({"output_tokens": 1000}, model="claude-unknown")
    assert step_on(tokens_only) is CALL_MODEL  # no dollar cap, nothing to price


def test_a_message_to_a_session_ended_by_its_budget_is_refused_unless_it_raises_it() -> None:
    log = create({"output_tokens": 100, "usd": 5})
    answer(log, e.Usage(output_tokens=150))
    [refused] = message(log)
    assert isinstance(refused.payload, e.InputRejectedPayload) and refused.payload.code == "budget_exhausted"
    assert "output_tokens 150 of 100" in refused.payload.reason
    [too_little] = message(log, {"output_tokens": 150})
    assert isinstance(too_little.payload, e.InputRejectedPayload) and too_little.payload.code == "budget_exhausted"
    assert "already" in too_little.payload.reason

    raised = message(log, {"output_tokens": 1000})
    assert [d.type for d in raised] == ["budget_changed", "user_message"]
    assert len({d.causation_id for d in raised}) == 1
    change = raised[0].payload
    assert isinstance(change, e.BudgetChangedPayload)
    # the caps the message named replace those in force; the others stay
    assert (change.budget, change.previous) == (Budget(output_tokens=1000, usd=5), Budget(output_tokens=100, usd=5))
    log.append(raised, SID)
    assert log.state.status == "idle" and log.state.budget == change.budget
    assert step_on(log) is CALL_MODEL  # the model is called again


def test_a_message_may_raise_the_budget_of_a_running_session_before_it_is_queued() -> None:
    log = create({"output_tokens": 100})
    assert step_on(log) is CALL_MODEL and log.state.in_turn
    drafts = message(log, {"output_tokens": 500})
    assert [d.type for d in drafts] == ["budget_changed", "message_queued"]


def test_a_paused_turn_stops_before_its_next_call_once_the_budget_is_spent() -> None:
    log = create({"output_tokens": 100})
    where = answer(log, e.Usage(output_tokens=120), tool=False, stop_reason="pause_turn")
    # the API paused the turn to be resumed: that would be another call, so the budget ends it first
    assert where is None and log.state.ended_reason == "budget" and log.events[-2].type == "model_turn"


def test_a_budget_set_on_a_session_created_without_one_prices_its_earlier_calls_then() -> None:
    log = create(model=SONNET)
    assert log.events[0].payload.price is None  # type: ignore[union-attr]  # no budget: no price bound
    answer(log, e.Usage(input_tokens=1_000_000))
    assert log.state.budget is None and log.state.spend.spent().usd is None
    drafts = message(log, {"usd": 10})
    change = drafts[0].payload
    assert isinstance(change, e.BudgetChangedPayload) and change.previous is None
    assert change.price == DEFAULT_TABLE.price_for(SONNET)
    log.append(drafts, SID)
    assert log.state.spend.spent().usd == 3.0  # the call before was priced when the price was bound


def test_a_summary_the_model_wrote_is_spent_like_a_turn() -> None:
    log = create({"input_tokens": 1000}, model=SONNET)
    compaction = e.CompactionPayload(summary="s", covered_from_seq=1, covered_to_seq=2, tokens_before=9,
                                     tokens_after=1, summary_model=SONNET, usage=e.Usage(input_tokens=1000))
    log.append([Draft(payload=compaction, actor=f"agent:{SONNET}", trust="instruction")], SID)
    assert log.state.spend.spent().input_tokens == 1000
    assert step_on(log) is None and log.state.ended_reason == "budget"


def test_a_fork_spends_from_zero_under_its_configs_budget_at_the_price_bound_then() -> None:
    parent = create({"output_tokens": 100}, model=SONNET)
    answer(parent, e.Usage(output_tokens=100))
    assert parent.state.ended_reason == "budget"
    at = next(ev.seq for ev in parent.events if ev.type == "tool_result")  # a whole step
    cheaper = PriceTable.with_overrides({SONNET: {"input_usd_per_mtok": 1, "output_usd_per_mtok": 2}})
    fork = Log()
    fork.state = fold(parent.events[:at])  # the prefix, as the brain reads it from the parent
    cmd = c.CreateSession(command_id="f", session_id="s2", tenant="t", actor="user:ann", message="again",
                          fork_of=c.ForkOrigin(session_id=SID, seq=at))
    drafts = fork_drafts(fork.state, parent.events[:at], cmd, cheaper)
    forked = drafts[0].payload
    assert isinstance(forked, e.ForkedPayload) and forked.price == cheaper.price_for(SONNET)
    fork.append(drafts, "s2")
    assert fork.state.budget == Budget(output_tokens=100) and fork.state.spend.spent().output_tokens == 0


def test_configs_and_events_without_a_budget_keep_their_canonical_json() -> None:
    assert "budget" not in e.SessionConfig().model_dump(mode="json")
    plain = create()
    assert set(plain.events[0].payload.model_dump(mode="json")) == {"config", "owner", "title", "parent_session_id",
                                                                    "fork_seq"}
    assert set(e.SessionEndedPayload(reason="completed").model_dump(mode="json")) == {"reason", "detail"}
    assert "budget" not in c.PostMessage(command_id="m", session_id=SID, text="x").model_dump(mode="json")


def test_a_price_the_table_no_longer_knows_leaves_the_bound_one_in_force() -> None:
    log = create({"usd": 100}, model=SONNET)
    unknown = PriceTable({})
    drafts = message(log, {"usd": 200}, prices=unknown)
    assert drafts[0].payload.price is None  # type: ignore[union-attr]
    log.append(drafts, SID)
    assert log.state.spend.price == DEFAULT_TABLE.price_for(SONNET)
    assert isinstance(log.state.spend.price, ModelPrice)


def test_a_last_reply_that_spends_the_budget_completes_the_session_and_a_message_after_needs_a_raise() -> None:
    log = create({"output_tokens": 100})
    assert answer(log, e.Usage(output_tokens=100), tool=False) is None
    assert log.state.ended_reason == "completed"  # the model had finished: nothing was stopped
    [refused] = message(log)
    assert isinstance(refused.payload, e.InputRejectedPayload) and refused.payload.code == "budget_exhausted"
    assert [d.type for d in message(log, {"output_tokens": 101})] == ["budget_changed", "user_message"]
