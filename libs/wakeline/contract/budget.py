"""A budget: caps on what model calls may spend (`Budget`), and the figures held against
them (`Spent`). Pure shapes, no prices (those are `prices.py`).

A session's budget is bound by `config.budget` when it is created and changed by its owner
with a message that carries one (the `budget_changed` event); reaching any cap stops the
session before its next model call (`wakeline.agent.budget`). Nothing here is a session's:
spends add up (`Spent.__add__`), so a check over many sessions, a tenant's quota, holds
their sum against a `Budget` the same way.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Cap = Literal["input_tokens", "output_tokens", "usd"]
CAPS: tuple[Cap, ...] = ("input_tokens", "output_tokens", "usd")
_TOKENS = 10**15


def _unset(value: object) -> bool:
    return value is None


class Spent(BaseModel):
    """What model calls used: input tokens (uncached, written to the prompt cache and read from
    it), output tokens, and their price in US dollars (None: a model with no price made some
    of them, so the dollars cannot be counted)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    usd: float | None = Field(default=0.0, ge=0)

    def __add__(self, other: Spent) -> Spent:
        usd = None if self.usd is None or other.usd is None else self.usd + other.usd
        return Spent(input_tokens=self.input_tokens + other.input_tokens,
                     output_tokens=self.output_tokens + other.output_tokens, usd=usd)


class Budget(BaseModel):
    """Caps on spending; a cap left out (None) does not bind. Reaching a cap is spending it
    all: the next call would go over."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_tokens: int | None = Field(default=None, ge=1, le=_TOKENS, exclude_if=_unset,
                                     description="Input tokens the model reads, cached or not.")
    output_tokens: int | None = Field(default=None, ge=1, le=_TOKENS, exclude_if=_unset,
                                      description="Output tokens the model writes, thinking included.")
    usd: float | None = Field(default=None, gt=0, le=1e9, exclude_if=_unset,
                              description="US dollars, at the price of the session's model.")

    @model_validator(mode="after")
    def _caps_something(self) -> Budget:
        if all(getattr(self, cap) is None for cap in CAPS):
            raise ValueError("a budget caps at least one of input_tokens, output_tokens, usd")
        return self

    def merged(self, change: Budget) -> Budget:
        """This budget with each cap `change` names set to its figure; the others as they were."""
        return Budget.model_validate({**self.model_dump(), **change.model_dump()})

    def reached(self, spent: Spent) -> tuple[Cap, ...]:
        """The caps `spent` has reached. A dollar cap whose dollars cannot be counted (a model
        with no price) counts as reached: a budget fails closed."""
        reached: list[Cap] = []
        if self.input_tokens is not None and spent.input_tokens >= self.input_tokens:
            reached.append("input_tokens")
        if self.output_tokens is not None and spent.output_tokens >= self.output_tokens:
            reached.append("output_tokens")
        if self.usd is not None and (spent.usd is None or spent.usd >= self.usd):
            reached.append("usd")
        return tuple(reached)
