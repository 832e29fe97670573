"""What a session's own model calls spent (`Spend`), and the budget in force: `after(budget,
spend, event)`, the one definition the fold and the gateway's cost report share. Pure.

A model call is a `model_turn`, or a summary the model wrote for a compaction (its usage is
in the `compaction` event). Each is charged at the price the log bound when it was made: the
price `session_created` or `forked` carries, or the one a later `budget_changed` carries from
then on; calls made while none was bound are priced when one is. Dollars are summed in
picodollars (`prices.PICODOLLARS`), whole numbers, so the same log always sums to the same
figure and a cap is reached exactly at its boundary. A fork's spend is its own: the prefix's
calls are its parent's. Whether a budget is reached is `Budget.reached`; what the brain does
then is `wakeline.agent.budget`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from wakeline.contract.budget import Budget, Spent
from wakeline.contract.events import (
    BudgetChanged, BudgetChangedPayload, ContextCompacted, Event, ModelResponded, SessionCreated, SessionForked, Usage,
)
from wakeline.contract.prices import PICODOLLARS, ModelPrice


NOTHING = Usage()  # frozen: one zero shared by every new spend


def cost_of(usage: Usage, price: ModelPrice) -> int:
    """What `usage` costs at `price`, in picodollars: uncached input, output, cache writes and
    cache reads each at its own price."""
    per_input, per_output, per_write, per_read = price.per_token()
    return (usage.input_tokens * per_input + usage.output_tokens * per_output
            + usage.cache_creation_input_tokens * per_write + usage.cache_read_input_tokens * per_read)


@dataclass(frozen=True)
class Spend:
    """The session's own model calls: every token (`usage`), what those priced when they were
    made cost (`picodollars`), those made while no price was bound (`unpriced`), and the price
    the next call is charged at (`price`, None: none bound)."""

    usage: Usage = NOTHING
    picodollars: int = 0
    unpriced: Usage = NOTHING
    price: ModelPrice | None = None

    def charged(self, usage: Usage) -> Spend:
        # Built directly, not with `dataclasses.replace`: once per model call in every fold.
        if self.price is None:
            total = self.usage + usage
            # While no price was ever bound every call is unpriced: one sum, shared (`usage` is frozen).
            unpriced = total if self.unpriced is self.usage else self.unpriced + usage
            return Spend(total, self.picodollars, unpriced, None)
        return Spend(self.usage + usage, self.picodollars + cost_of(usage, self.price), self.unpriced, self.price)

    def priced_at(self, price: ModelPrice) -> Spend:
        """From here calls are charged at `price`; those no price was bound for, at it too."""
        return Spend(usage=self.usage, picodollars=self.picodollars + cost_of(self.unpriced, price), price=price)

    def spent(self, fallback: ModelPrice | None = None) -> Spent:
        """The figures a budget is held against. Dollars are counted at the price the log bound;
        with none bound, at `fallback` (a reader's price table; the brain's decisions pass
        none), else they are unknown (None): a dollar cap then counts as reached."""
        picodollars: int | None = self.picodollars
        if self.price is None:
            picodollars = None if fallback is None else self.picodollars + cost_of(self.unpriced, fallback)
        u = self.usage
        return Spent(input_tokens=u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens,
                     output_tokens=u.output_tokens,
                     usd=None if picodollars is None else picodollars / PICODOLLARS)


def after(budget: Budget | None, spend: Spend, event: Event) -> tuple[Budget | None, Spend]:
    """The budget in force and the spend after `event`."""
    match event:
        case SessionCreated(payload=p) | SessionForked(payload=p):
            return p.config.budget, Spend(price=p.price)
        case ModelResponded(payload=p):
            return budget, spend.charged(p.usage)
        case ContextCompacted(payload=p) if p.summary_model and p.usage is not None:
            return budget, spend.charged(p.usage)
        case BudgetChanged(payload=p):
            return p.budget, changed(spend, p)
    return budget, spend


def changed(spend: Spend, change: BudgetChangedPayload) -> Spend:
    """The spend once `change` is recorded: charged at the price it binds, if it binds one."""
    return spend if change.price is None else spend.priced_at(change.price)


def metered(events: Iterable[Event]) -> tuple[Budget | None, Spend]:
    """The budget in force and the spend after a session's own events (a fork's from its
    `forked` event): what the fold holds, for readers that do not fold."""
    budget: Budget | None = None
    spend = Spend()
    for event in events:
        budget, spend = after(budget, spend, event)
    return budget, spend
