"""The gateway's side of a budget, pure: `/cost` shows spend against the budget in force with
the brain's own figures, a message's answer names the budget it set, a refusal is a 409, and
a dollar cap on a model with no price is refused at creation (422 `unpriced_model`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wakeline.contract.budget import Budget, Spent
from wakeline.contract.commands import PostMessage
from wakeline.contract.events import SessionConfig, parse_event
from wakeline.contract.prices import DEFAULT_TABLE, PriceTable
from wakeline.log.fold import fold
from wakeline_gateway.cost import session_cost
from wakeline_gateway.dispatch import describe
from wakeline_gateway.errors import ApiError
from wakeline_gateway.rejections import rejection_status
from wakeline_gateway.routes.sessions import priced
from wakeline_gateway.transcript.entries import entries
from tests.factories import draft, new_session_id, sealed

LOG = [parse_event(line) for line in (Path(__file__).parent / "golden" / "recorded_budget.jsonl").read_bytes()
       .splitlines() if line.strip()]


def test_cost_shows_the_budget_in_force_and_the_spend_the_brain_decides_by() -> None:
    stopped = next(i for i, ev in enumerate(LOG) if ev.type == "session_ended") + 1
    cost = session_cost(LOG[0].session_id, LOG[:stopped])
    assert cost.budget is not None
    assert cost.budget.budget == Budget(output_tokens=200, usd=0.05)
    assert cost.budget.spent == Spent(input_tokens=17_000, output_tokens=220, usd=0.0303)
    assert cost.budget.reached == ["output_tokens"] and cost.usd == 0.0303
    after = session_cost(LOG[0].session_id, LOG)  # raised and finished
    assert after.budget is not None and after.budget.reached == []
    assert after.budget.spent == fold(LOG).spend.spent()  # the fold's figures, exactly


def test_cost_prices_a_session_without_a_budget_at_the_gateways_table() -> None:
    drafts = [draft("session_created", "cmd-create", config={"model": "claude-sonnet-4-5"}, owner="user:alice"),
              draft("user_message", "cmd-1", text="q"), draft("turn_started", turn=1),
              draft("model_turn", text="a", usage={"input_tokens": 1_000_000, "output_tokens": 0})]
    log = sealed(drafts, new_session_id())
    cost = session_cost(log[0].session_id, log, DEFAULT_TABLE)
    assert cost.budget is None and cost.usd == 3.0
    assert session_cost(log[0].session_id, log, PriceTable({})).usd is None  # no price: no dollars


def test_a_message_that_set_a_budget_is_answered_with_it_and_a_refusal_is_a_conflict() -> None:
    changed = next(ev for ev in LOG if ev.type == "budget_changed")
    command = PostMessage(command_id=changed.causation_id or "", session_id=changed.session_id, text="x")
    answer = describe(command, changed, 15)
    assert (answer.status, answer.outcome, answer.seq) == ("done", "budget_changed", changed.seq)
    assert answer.note and f"seq {changed.seq + 1}" in answer.note
    assert rejection_status("budget_exhausted") == 409


def test_a_dollar_cap_on_a_model_with_no_price_is_refused_at_creation() -> None:
    with pytest.raises(ApiError) as refused:
        priced(SessionConfig(model="claude-unknown", budget={"usd": 1}), DEFAULT_TABLE)
    assert (refused.value.status, refused.value.code) == (422, "unpriced_model")
    assert "WAKELINE_MODEL_PRICES" in refused.value.detail
    for fine in (SessionConfig(model="claude-unknown", budget={"output_tokens": 10}),
                 SessionConfig(model="claude-sonnet-4-5", budget={"usd": 1}), SessionConfig(model="claude-unknown")):
        assert priced(fine, DEFAULT_TABLE) is fine


def test_the_transcript_says_who_set_which_budget_and_why_the_session_stopped() -> None:
    texts = {(en.type, en.text) for en in entries(LOG)}
    assert ("budget_changed", "budget set by user:alice: output_tokens 1000, usd 0.05 (was output_tokens 200, "
            "usd 0.05)") in texts
    assert ("session_ended", "session ended (budget): budget reached: output_tokens 220 of 200") in texts


def test_the_budgets_figures_are_the_brains_even_where_the_gateway_knows_a_price_the_log_does_not() -> None:
    drafts = [draft("session_created", "cmd-create", config={"model": "house-model", "budget": {"usd": 1}},
                    owner="user:alice"),  # the brain knew no price: none bound, the dollar cap reached
              draft("user_message", "cmd-1", text="q"),
              draft("session_ended", reason="budget")]
    log = sealed(drafts, new_session_id())
    table = PriceTable.with_overrides({"house-model": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 1}})
    cost = session_cost(log[0].session_id, log, table)
    assert cost.usd == 0.0  # what it cost, at the gateway's price
    assert cost.budget is not None and cost.budget.spent.usd is None and cost.budget.reached == ["usd"]
