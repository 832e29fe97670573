"""`TenantQuotas`: the brain's side of a tenant's quotas that bind inside the runtime.

Tokens per day: `spent(tenant)` before each model call says whether the tenant has used its
day's tokens (the session then records `agent.quota.quota_end` instead of the call), and
`count(tenant, usage)` adds each call's tokens afterwards. Both are `count_tenant_tokens`
(migrations 0028, 0030), one statement that adds (or only reads) and returns the day's total with
the tenant's quotas as they apply (its own under the operator's ceiling), so every brain sees one
count and a raised quota is learnt at once.

The cost is one round trip per model call, the add, and none for a tenant with no quota in
force (unlimited, the default): its tokens are not added, so a quota set during the day counts
from when the brains learn it (within `fresh_s`). A check reuses what the last add or read said
for the tenant while it is younger than `fresh_s` and under the quota; otherwise (and always
before refusing) it reads again, so a refusal is never decided on a stale figure. The price:
calls in flight when the quota is reached, and other brains' calls of the last `fresh_s`, may
go past it: the quota is a daily cap, not an exact one.

Tool calls in flight: the tenant's quota as the last add or read said it
(`calls_in_flight`), carried to the runners on each tool call, which hold it
(the runner's `keyed.py`). A tool call follows the model call whose add read it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime

import asyncpg

from wakeline.agent.quota import TokenDay, tokens_counted
from wakeline.contract.events import Usage
from wakeline.storage.pg import TenantPool
from wakeline_brain.metrics import QUOTA_STOPS, TENANT_TOKENS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Counted:
    """What `count_tenant_tokens` returns: the day, its total, the tenant's quotas that apply
    (None: the default applies, which is the counter's own default when it was told none)."""

    day: date
    used: int
    tokens_per_day: int | None
    tool_calls_in_flight: int | None


Counter = Callable[[str, int], Awaitable[Counted]]  # (tenant, tokens to add, 0: only read)


@dataclass(frozen=True)
class _Known:
    day: TokenDay
    calls_in_flight: int | None
    at: float  # monotonic


class TenantQuotas:
    def __init__(self, counter: Counter, tokens_per_day: int | None, tool_calls_in_flight: int | None,
                 fresh_s: float = 2.0, clock: Callable[[], float] = time.monotonic,
                 today: Callable[[], date] = lambda: datetime.now(UTC).date()):
        self._counter, self._fresh_s, self._clock, self._today = counter, fresh_s, clock, today
        self._defaults = (tokens_per_day, tool_calls_in_flight)
        self._known: dict[str, _Known] = {}
        self._unsent: dict[str, int] = {}  # tokens whose add failed, sent with the tenant's next

    async def spent(self, tenant: str) -> TokenDay | None:
        """The tenant's day when its tokens are used up (the call must not be made), else None.
        Raises when the count cannot be read: the caller waits and asks again."""
        known = self._known.get(tenant)
        if (known is not None and not known.day.spent and self._clock() - known.at < self._fresh_s
                and known.day.day == self._today()):
            return None
        day = await self._count(tenant, 0)
        if not day.spent:
            return None
        QUOTA_STOPS.labels(tenant).inc()
        return day

    async def count(self, tenant: str, usage: Usage) -> None:
        """Adds a call's tokens to the tenant's day. A failed add is kept and sent with the
        next: the reply it counts is good, and a count late by a call is better than none."""
        TENANT_TOKENS.labels(tenant).inc(tokens_counted(usage))
        known = self._known.get(tenant)
        if known is not None and known.day.limit is None:
            return  # no quota to count against: no round trip (a new one is read within fresh_s)
        tokens = tokens_counted(usage) + self._unsent.pop(tenant, 0)
        if tokens <= 0:
            return
        try:
            await self._count(tenant, tokens)
        except (OSError, asyncpg.PostgresError, TimeoutError) as err:
            self._unsent[tenant] = tokens
            log.warning("tenant %s: %d tokens not counted yet (%r); sent with its next call", tenant, tokens, err)

    def calls_in_flight(self, tenant: str) -> int | None:
        """The tenant's tool calls in flight quota as last read, else the default."""
        known = self._known.get(tenant)
        return known.calls_in_flight if known is not None else self._defaults[1]

    async def _count(self, tenant: str, tokens: int) -> TokenDay:
        counted = await self._counter(tenant, tokens)
        limit = counted.tokens_per_day if counted.tokens_per_day is not None else self._defaults[0]
        calls = counted.tool_calls_in_flight if counted.tool_calls_in_flight is not None else self._defaults[1]
        day = TokenDay(tenant=tenant, day=counted.day, used=counted.used, limit=limit)
        self._known[tenant] = _Known(day, calls, self._clock())
        return day


def postgres_counter(pool: TenantPool, tokens_per_day: int | None = None,
                     tool_calls_in_flight: int | None = None) -> Counter:
    """`count_tenant_tokens` as one statement, its own transaction: one round trip. Told the
    defaults, it returns the limits that apply (migration 0030: the lower of the tenant's own value
    and its ceiling, the operator's else the default), so a tenant's admin cannot raise its own
    quota past the default or the operator's ceiling."""
    async def run(conn: asyncpg.Connection, tenant: str, tokens: int) -> asyncpg.Record:
        return await conn.fetchrow("SELECT * FROM count_tenant_tokens($1, $2, $3, $4)", tenant, tokens,
                                   tokens_per_day, tool_calls_in_flight)

    async def count(tenant: str, tokens: int) -> Counted:
        row = await pool.system_statement(run, tenant, tokens)
        return Counted(row["day"], row["used"], row["tokens_per_day"], row["tool_calls_in_flight"])
    return count
