"""The quotas' rules, pure: their names, the rate quotas' windows, which a command counts
against, the values that apply to a tenant, how long a refused caller should wait, the
defaults every service that admits commands reads (`QuotaDefaults`), and the header that
marks a command already admitted. The gateway admits what it sends (429 over a quota); the
brain admits what any other Kafka client produced to the inbox (`input_rejected`
`quota_exceeded`).

The count itself is Postgres's (`admit_quotas`, migration 0026; `wakeline.storage.quota_counts`):
a sliding-window estimate, this window's count plus the previous window's weighted by how much
of it still lies within one window of now. `retry_after_s` solves that same estimate for the
first moment one more would fit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, Field, field_validator

from wakeline.contract.commands import CommandBase, CreateSession, SubmitToolResult

QuotaName = Literal["running_sessions", "sessions_per_minute", "commands_per_second", "tool_calls_in_flight",
                    "tokens_per_day"]
QUOTA_NAMES: tuple[QuotaName, ...] = get_args(QuotaName)
QuotaValues = Mapping[str, int | None]
# The largest value each may take (the columns are integer, tokens per day bigint).
MAXIMUM: dict[QuotaName, int] = {name: 10**15 if name == "tokens_per_day" else 10**9 for name in QUOTA_NAMES}
# The rate quotas commands are admitted against, each with its window in seconds.
WINDOW_S: dict[QuotaName, int] = {"sessions_per_minute": 60, "commands_per_second": 1}
# Those enforced: the rates by the gateway and the brains (what other Kafka clients send),
# running sessions by the brains' turn slots, tool calls in flight by the runners, tokens per
# day by the brains (docs/operations.md, "Quotas").
ENFORCED: tuple[QuotaName, ...] = (*WINDOW_S, "running_sessions", "tool_calls_in_flight", "tokens_per_day")
# On an inbox record: the gateway has counted this command against its tenant's quotas, so the
# brain does not count it again. Whoever may write the inbox may set it, as it may name any
# tenant: inbox producers are trusted already (docs/producing-tasks.md); the count is for a
# trusted client that sends too much, not for one that forges what it is.
ADMITTED_HEADER = "wakeline-admitted"


def counted_against(command: CommandBase) -> tuple[QuotaName, ...]:
    """Every command counts against commands per second but a declared tool's result; a new
    session (a fork too) also against sessions per minute, checked first: of the two it is the
    longer wait when both are full. A result answers a call the session itself made: their rate
    is the sessions' own pace (bounded by tool calls in flight), and refusing one only stalls a
    session the tenant was allowed to run (a pool answering 100 sessions at once was refused
    by the default of 200 a second in `make bench`)."""
    if isinstance(command, CreateSession):
        return ("sessions_per_minute", "commands_per_second")
    if isinstance(command, SubmitToolResult):
        return ()
    return ("commands_per_second",)


def ceilings_in_force(ceilings: QuotaValues, defaults: QuotaValues) -> dict[str, int | None]:
    """The most the tenant's admin may set: the operator's ceiling for the tenant, else the
    default (None: no ceiling)."""
    return {name: ceilings.get(name) if ceilings.get(name) is not None else defaults.get(name)
            for name in QUOTA_NAMES}


def effective(own: QuotaValues, defaults: QuotaValues, ceilings: QuotaValues | None = None) -> dict[str, int | None]:
    """What applies to the tenant: the lower of its own value and its ceiling (the operator's,
    else the default); None: unlimited. Postgres applies the same rule (`tenant_quota_limits`,
    migration 0030)."""
    caps = ceilings_in_force(ceilings or {}, defaults)
    return {name: min((v for v in (own.get(name), caps[name]) if v is not None), default=None)
            for name in QUOTA_NAMES}


def above_ceiling(asked: QuotaValues, kept: QuotaValues, defaults: QuotaValues,
                  ceilings: QuotaValues) -> list[tuple[str, int, int]]:
    """The quotas a tenant's admin asked above their ceiling, as (quota, asked, ceiling). A value
    the tenant already had (`kept`) passes: a ceiling the operator lowered later caps it anyway,
    and refusing it would block every other change."""
    caps = ceilings_in_force(ceilings, defaults)
    over: list[tuple[str, int, int]] = []
    for name in QUOTA_NAMES:
        value, cap = asked.get(name), caps[name]
        if value is not None and cap is not None and value > cap and value != kept.get(name):
            over.append((name, value, cap))
    return over


@dataclass(frozen=True)
class Refusal:
    """Why `admit_quotas` refused a command: the quota, its limit, the previous and the current
    window's counts, the window's length and how far into it (0 to 1) the refusal came."""

    quota: str
    limit: int
    previous: int
    current: int
    window_s: int
    elapsed: float


def retry_after_s(refusal: Refusal) -> int:
    """Whole seconds (at least 1) until the estimate leaves room for one more, if nobody else
    is admitted meanwhile: later in this window, as the previous window's weight falls, or in
    the next, where this window's count is the one that fades."""
    limit, previous, current, window, elapsed = (refusal.limit, refusal.previous, refusal.current,
                                                 refusal.window_s, refusal.elapsed)
    room = limit - current - 1  # what the previous window's weighted count may still be
    if room > 0 and previous > 0:
        wait = (1 - room / previous - elapsed) * window
    else:  # not before the next window: this window's count weighs in, fading
        wait = (1 - elapsed + max(0.0, 1 - (limit - 1) / current if current else 0.0)) * window
    return max(1, math.ceil(wait - 1e-9))


def unit(quota: str) -> str:
    """`sessions_per_minute` → `sessions per minute`."""
    return quota.replace("_", " ")


class QuotaDefaults(BaseModel):
    """Each tenant's quotas unless its admin set its own (PUT /v1/quotas), as settings
    (`WAKELINE_QUOTA_<NAME>`: a number, or `unlimited`); mixed into the settings of every
    service that admits commands (gateway, brain), so both apply the same. Sized so one tenant
    on a laptop never meets them (`make bench` creates ~8 sessions a second and its pool answers
    ~60 tool calls a second). Enforced: the rates by the gateway and the brains, running
    sessions and tokens per day by the brains, tool calls in flight by the runners (as the
    brains carry it to them)."""

    quota_running_sessions: int | None = Field(default=100, ge=1, le=MAXIMUM["running_sessions"])
    quota_sessions_per_minute: int | None = Field(default=600, ge=1, le=MAXIMUM["sessions_per_minute"])
    quota_commands_per_second: int | None = Field(default=200, ge=1, le=MAXIMUM["commands_per_second"])
    quota_tool_calls_in_flight: int | None = Field(default=200, ge=1, le=MAXIMUM["tool_calls_in_flight"])
    quota_tokens_per_day: int | None = Field(default=None, ge=1, le=MAXIMUM["tokens_per_day"])

    @field_validator(*(f"quota_{name}" for name in QUOTA_NAMES), mode="before")
    @classmethod
    def _unlimited(cls, value: object) -> object:
        """`WAKELINE_QUOTA_TOKENS_PER_DAY=unlimited` (or empty): no default limit."""
        return None if isinstance(value, str) and value.strip().lower() in ("", "unlimited") else value

    def quota_defaults(self) -> dict[str, int | None]:
        return {name: getattr(self, f"quota_{name}") for name in QUOTA_NAMES}


def exceeded(tenant: str, refusal: Refusal) -> str:
    """The words a refusal is told in, by the gateway (429) and the brain (`input_rejected`)."""
    return f"tenant {tenant!r} is over its quota of {refusal.limit} {unit(refusal.quota)}"
