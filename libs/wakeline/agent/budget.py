"""When a budget stops a session, and what a message to it must carry. Pure.

`budget_end(state)` is the `session_ended` (reason `budget`, with the budget and what was
spent) a session records instead of its next model call once a cap of the budget in force
is reached: `steps.next_step` asks at a turn's start, where `max_turns` is checked, and again
before any other model call of a turn (a paused turn resumed, the call after a summary the
model wrote). The figures are the log's own (`wakeline.log.spending`: its calls' usage at the
price it bound), so the same log gives the same decision on every host and in the replay check.

A message may carry a budget (`budget_change`): its caps replace those in force, recorded as
`budget_changed` before the message. A message that would leave the budget reached is refused
(`budget_refusal`, code `budget_exhausted`): the model would not be called, so nothing would
answer it, and a session ended `budget` is continued only by raising it.
"""

from __future__ import annotations

from wakeline.contract import events as e
from wakeline.contract.budget import Budget, Cap, Spent
from wakeline.contract.prices import ModelPrice
from wakeline.log.chain import Draft
from wakeline.log.spending import Spend, changed
from wakeline.log.state import SessionState

SYSTEM = "system:brain"


def budget_end(state: SessionState) -> Draft | None:
    """The end to record instead of a model call, or None while the budget allows the call."""
    if state.budget is None:
        return None
    spent = state.spend.spent()
    reached = state.budget.reached(spent)
    if not reached:
        return None
    detail = f"budget reached: {shortfall(state.budget, spent, reached, state.config.model)}"
    ended = e.SessionEndedPayload(reason="budget", detail=detail, budget=state.budget, spent=spent)
    return Draft(payload=ended, actor=SYSTEM, trust="instruction")


def budget_change(state: SessionState, change: Budget, price: ModelPrice | None) -> e.BudgetChangedPayload:
    """What a message carrying `change` records: the caps it names over those in force, and
    the price the session's calls are charged at from here (the table's now)."""
    whole = change if state.budget is None else state.budget.merged(change)
    return e.BudgetChangedPayload(budget=whole, previous=state.budget, price=price)


def budget_refusal(state: SessionState, change: e.BudgetChangedPayload | None) -> str | None:
    """Why a message (carrying `change`, if any) is refused: the budget in force after it is
    still reached. None: it may go on."""
    budget = state.budget if change is None else change.budget
    if budget is None:
        return None
    spend: Spend = state.spend if change is None else changed(state.spend, change)
    spent = spend.spent()
    reached = budget.reached(spent)
    if not reached:
        return None
    why = shortfall(budget, spent, reached, state.config.model)
    if change is None:
        return (f"the session's budget is spent ({why}); send the message with a raised budget "
                "(`budget`) to continue")
    return f"the budget the message sets is spent already ({why}); raise each cap above what was spent"


def shortfall(budget: Budget, spent: Spent, reached: tuple[Cap, ...], model: str) -> str:
    """Each reached cap with its figures, e.g. `output_tokens 1200 of 1000; usd 0.51 of 0.5`."""
    parts = []
    for cap in reached:
        if cap == "usd" and spent.usd is None:
            parts.append(f"usd: no price is known for {model}, so its dollars cannot be counted "
                         "(WAKELINE_MODEL_PRICES gives one)")
        else:
            parts.append(f"{cap} {_figure(getattr(spent, cap))} of {_figure(getattr(budget, cap))}")
    return "; ".join(parts)


def _figure(value: float) -> str:
    """Tokens as they are; dollars to a nanodollar, without trailing zeros."""
    return str(value) if isinstance(value, int) else f"{value:.9f}".rstrip("0").rstrip(".")
