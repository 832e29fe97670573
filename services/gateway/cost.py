"""What a session cost, from its own log: `session_cost(events)`. Pure.

Tokens are the model's own counts as each `model_turn` recorded them (`usage`): every
integer field of it, so cache tokens count once a model records them; a summary the model
wrote for a compaction is a model call too, with the usage its compaction event records.
Turns are `turn_started` events; model wall time runs from a turn's start (or the tool
results it waited for) to the model's reply, so a summary call made first (between those,
before its compaction event) is inside it; tool wall time is what the runner measured
(`duration_ms`), or the time from call to result when it did not. A fork's cost is its own
log's: what its inherited prefix cost is its parent's (`GET` the parent's cost).

Dollars and the budget are the log's own figures (`wakeline.log.spending`, the code the
brain's fold runs): each call at the price the log bound when it was made, so `budget`
shows exactly what the brain decides by. Calls no price was bound for (a session without
a budget) are priced at the gateway's table, for `usd` only.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, Field

from wakeline.contract.budget import Budget, Cap, Spent
from wakeline.contract.events import (
    ContextCompacted, Event, ModelResponded, SessionCreated, SessionForked, TokenSource, ToolCallRequested,
    ToolResultReceived, TurnStarted, Usage,
)
from wakeline.contract.prices import DEFAULT_TABLE, PriceTable
from wakeline.log.spending import Spend, after


class ModelCostPublic(BaseModel):
    model: str
    calls: int
    tokens: dict[str, int]


class CompactionCostPublic(BaseModel):
    seq: int
    covered_from_seq: int
    covered_to_seq: int
    tokens_before: int
    tokens_after: int
    # the model's own count (count_tokens) or the local estimate (issue 15)
    tokens_before_source: TokenSource = "estimate"
    tokens_after_source: TokenSource = "estimate"
    resets_prompt_cache: bool = False  # the next request paid a cold prefill (issue 15)


class BudgetPublic(BaseModel):
    """The budget in force, what the session's own model calls spent against it, and the caps
    that spending has reached (any: the session stops, or stopped, before its next model call)."""

    budget: Budget
    spent: Spent
    reached: list[Cap]


class CostPublic(BaseModel):
    session_id: str
    models: list[ModelCostPublic]
    tokens: dict[str, int]  # the sum over models
    turns: int
    model_calls: int
    tool_calls: int
    tool_errors: int
    compactions: list[CompactionCostPublic]
    model_wall_s: float
    tool_wall_s: float
    # Prompt caching (issue 15): the share of all input tokens read from the cache, and what
    # that saved in input tokens at the base price (reads at a tenth, less the extra quarter
    # paid on cache writes; negative when what was written was never read).
    cache_hit_rate: float = 0.0
    cache_saved_input_tokens: float = 0.0
    inherited_from: str | None = None  # a fork: its prefix's cost is this session's, up to fork_seq
    fork_seq: int | None = None
    # The newest event counted: the archive may not have stored yet what a live stream just
    # showed, and a reader that saw seq n asks again until this reaches it (the console does).
    upto_seq: int = 0
    usd: float | None = Field(default=None, description="What the model calls cost in US dollars, at the prices "
                              "the log bound, else the gateway's; None: the model has no price.")
    budget: BudgetPublic | None = None  # None: no budget in force


def session_cost(session_id: str, events: Iterable[Event], prices: PriceTable = DEFAULT_TABLE) -> CostPublic:
    models: dict[str, ModelCostPublic] = {}
    cost = CostPublic(session_id=session_id, models=[], tokens={}, turns=0, model_calls=0, tool_calls=0,
                      tool_errors=0, compactions=[], model_wall_s=0.0, tool_wall_s=0.0)
    waiting_since: datetime | None = None  # when the model was last asked
    usage = Usage()
    called: dict[str, datetime] = {}
    budget, spend, session_model = None, Spend(), ""
    for event in events:
        cost.upto_seq = max(cost.upto_seq, event.seq)
        budget, spend = after(budget, spend, event)
        match event:
            case SessionCreated(payload=p):
                session_model = p.config.model
            case TurnStarted():
                cost.turns += 1
                waiting_since = event.ts
            case ModelResponded(payload=p):
                model = event.actor.removeprefix("agent:")
                entry = models.setdefault(model, ModelCostPublic(model=model, calls=0, tokens={}))
                entry.calls += 1
                cost.model_calls += 1
                usage += p.usage
                for name, value in p.usage.model_dump().items():
                    if isinstance(value, int):
                        entry.tokens[name] = entry.tokens.get(name, 0) + value
                        cost.tokens[name] = cost.tokens.get(name, 0) + value
                if waiting_since is not None:
                    cost.model_wall_s += (event.ts - waiting_since).total_seconds()
                waiting_since = None
            case ToolCallRequested(payload=p):
                cost.tool_calls += 1
                called[p.tool_call_id] = event.ts
            case ToolResultReceived(payload=p):
                cost.tool_errors += p.is_error
                start = called.get(p.tool_call_id)
                if p.duration_ms is not None:
                    cost.tool_wall_s += p.duration_ms / 1000
                elif start is not None:
                    cost.tool_wall_s += (event.ts - start).total_seconds()
                waiting_since = event.ts  # the next model call of the turn starts from here
            case ContextCompacted(payload=p):
                if p.summary_model and p.usage is not None:  # a summary the model wrote: a model call
                    entry = models.setdefault(p.summary_model, ModelCostPublic(model=p.summary_model, calls=0,
                                                                               tokens={}))
                    entry.calls += 1
                    cost.model_calls += 1
                    usage += p.usage
                    for name, value in p.usage.model_dump().items():
                        if isinstance(value, int):
                            entry.tokens[name] = entry.tokens.get(name, 0) + value
                            cost.tokens[name] = cost.tokens.get(name, 0) + value
                cost.compactions.append(CompactionCostPublic(
                    seq=event.seq, covered_from_seq=p.covered_from_seq, covered_to_seq=p.covered_to_seq,
                    tokens_before=p.tokens_before, tokens_after=p.tokens_after,
                    tokens_before_source=p.tokens_before_source, tokens_after_source=p.tokens_after_source,
                    resets_prompt_cache=p.resets_prompt_cache))
            case SessionForked(payload=p):
                cost.inherited_from, cost.fork_seq, session_model = p.parent_session_id, p.fork_seq, p.config.model
    cost.models = sorted(models.values(), key=lambda m: m.model)
    cost.model_wall_s, cost.tool_wall_s = round(cost.model_wall_s, 3), round(cost.tool_wall_s, 3)
    cost.cache_hit_rate = round(usage.cache_hit_rate(), 4)
    cost.cache_saved_input_tokens = round(usage.cache_saved_input_tokens(), 1)
    cost.usd = spend.spent(prices.price_for(session_model)).usd
    if budget is not None:
        spent = spend.spent()  # the brain's figures: no price but the log's
        cost.budget = BudgetPublic(budget=budget, spent=spent, reached=list(budget.reached(spent)))
    return cost
