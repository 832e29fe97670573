"""The running-sessions quota's slots (issue 34): `TurnSlots`, in Postgres for the brains and
in memory for the unit tests, under the same rules.

A session in a turn holds one of its tenant's slots. `take` is asked before a turn starts:
granted when the session holds a slot already (granted while it was queued, or taken before
a crash), or when the tenant has room and nobody is queued ahead of it; otherwise the
session joins the tenant's queue, once. `release` is asked once a turn is over (ended, or the
session ended or was deleted while queued): the slot or the queue entry goes, and the queue's
heads are granted the room, in arrival order. Both return the sessions granted a slot in
their absence: each is owed a wake (`wake_session` on the inbox), which the brain sends.
`sweep` puts right what a crash leaves behind (migration 0027).

With `total` (the deployment's sessions at work shared fairly, migration 0032): while more than
one tenant holds or waits for a slot, a tenant's limit is also the larger of an equal share of
`total` and what the others leave of it (at least one); alone, its quota only (`share`). A tenant
that gave a slot back within `LINGER_S` and wants none now still shares the total, holding the
most it held at a release in that time, up to an equal share (migration 0033): a tenant working in
bursts keeps its room through its pauses instead of winning it back, turn by turn, each burst. A
session keeps its slot from one turn to the next without asking, so `keep` is asked where a
session holding one starts its next turn: it gives the slot back and joins the back of the queue
when its tenant holds more than its limit, which the Postgres slots look at once per `check_s`
per tenant (a statement then), after any slot this brain granted (another tenant's arrival
shrinks the shares), or whenever the last answer said the tenant was over it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import asyncpg

from wakeline.storage.pg import TenantPool


@dataclass(frozen=True)
class SlotAnswer:
    granted: bool
    running: int  # the tenant's sessions holding a slot, this one included when granted
    limit: int | None  # None: unlimited
    woken: tuple[str, ...] = ()  # granted a slot on the way (a quota raised while they waited)


class TurnSlots(Protocol):
    async def take(self, tenant: str, session_id: str) -> SlotAnswer: ...

    async def release(self, tenant: str, session_id: str) -> tuple[str, ...]: ...

    async def keep(self, tenant: str, session_id: str) -> SlotAnswer: ...

    async def sweep(self) -> list[tuple[str, str]]: ...


# How long a tenant that gave its last slot back keeps its share (migration 0033's turn_slot_linger()).
LINGER_S = 10.0


def share(limit: int | None, total: int | None, others_held: int, tenants: int,
          others_gone: Sequence[int] = ()) -> int | None:
    """A tenant's limit with the deployment's fair share (`turn_slot_share`, migrations 0032 and
    0033): `tenants` hold, wait for, or gave a slot back within `LINGER_S` (this one included); the
    others at work hold `others_held`; `others_gone` are the peaks of those that gave theirs back."""
    if total is None or tenants < 2:
        return limit
    equal = -(-total // tenants)
    fair = max(equal, total - others_held - sum(min(peak, equal) for peak in others_gone), 1)
    return fair if limit is None else min(limit, fair)


class PostgresTurnSlots:
    """One statement per take or release (each its own transaction)."""

    def __init__(self, pool: TenantPool, default_limit: int | None, stale_s: float = 60.0, wake_s: float = 10.0,
                 total: int | None = None, check_s: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self._pool, self._default, self._total = pool, default_limit, total
        self._stale_s, self._wake_s = stale_s, wake_s
        self._check_s, self._clock = check_s, clock
        self._standing: dict[str, tuple[int, int | None, float]] = {}  # tenant -> (running, limit, when)

    async def take(self, tenant: str, session_id: str) -> SlotAnswer:
        row = await self._pool.system_statement(_take, tenant, session_id, self._default, self._total)
        answer = SlotAnswer(row["granted"], row["running"], row["slot_limit"], tuple(row["woken"] or ()))
        if answer.granted:  # the other tenants' shares may have shrunk: their next keep looks again
            self._standing = {t: (n, limit, float("-inf")) for t, (n, limit, _) in self._standing.items()}
        return self._noted(tenant, answer)

    async def keep(self, tenant: str, session_id: str) -> SlotAnswer:
        if self._total is None:
            return SlotAnswer(True, 0, None)  # no share: a slot held is kept, as before 0032
        running, limit, when = self._standing.get(tenant, (0, None, float("-inf")))
        if self._clock() - when >= self._check_s:
            row = await self._pool.system_statement(_standing, tenant, self._default, self._total)
            running, limit = row["running"], row["slot_limit"]
            self._standing[tenant] = (running, limit, self._clock())
        if limit is None or running <= limit:
            return SlotAnswer(True, running, limit)
        row = await self._pool.system_statement(_yield, tenant, session_id, self._default, self._total)
        return self._noted(tenant, SlotAnswer(row["granted"], row["running"], row["slot_limit"],
                                              tuple(row["woken"] or ())))

    def _noted(self, tenant: str, answer: SlotAnswer) -> SlotAnswer:
        """What an answer says of the tenant's standing, for the next `keep`."""
        if self._total is not None:
            self._standing[tenant] = (answer.running, answer.limit, self._clock())
        return answer

    async def release(self, tenant: str, session_id: str) -> tuple[str, ...]:
        return tuple(await self._pool.system_statement(_release, tenant, session_id, self._default, self._total) or ())

    async def sweep(self) -> list[tuple[str, str]]:
        rows = await self._pool.system_statement(_sweep, self._default, self._stale_s, self._wake_s, self._total)
        return [(r["tenant"], r["session_id"]) for r in rows]


async def _take(conn: asyncpg.Connection, tenant: str, session_id: str, default: int | None,
                total: int | None) -> asyncpg.Record:
    return await conn.fetchrow("SELECT * FROM take_turn_slot($1, $2, $3, $4)", tenant, session_id, default, total)


async def _yield(conn: asyncpg.Connection, tenant: str, session_id: str, default: int | None,
                 total: int | None) -> asyncpg.Record:
    return await conn.fetchrow("SELECT * FROM yield_turn_slot($1, $2, $3, $4)", tenant, session_id, default, total)


async def _standing(conn: asyncpg.Connection, tenant: str, default: int | None, total: int | None) -> asyncpg.Record:
    return await conn.fetchrow("SELECT * FROM turn_slot_standing($1, $2, $3)", tenant, default, total)


async def _release(conn: asyncpg.Connection, tenant: str, session_id: str, default: int | None,
                   total: int | None) -> list[str]:
    woken: list[str] = await conn.fetchval("SELECT release_turn_slot($1, $2, $3, $4)", tenant, session_id, default,
                                           total)
    return woken


async def _sweep(conn: asyncpg.Connection, default: int | None, stale_s: float, wake_s: float,
                 total: int | None) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await conn.fetch("SELECT * FROM sweep_turn_slots($1, $2, $3, $4)", default, stale_s,
                                                  wake_s, total)
    return rows


@dataclass
class _Tenant:
    slots: dict[str, bool] = field(default_factory=dict)  # session -> started
    queue: OrderedDict[str, None] = field(default_factory=OrderedDict)
    released_at: float = float("-inf")  # its last slot given back (with a total), and the most it
    peak: int = 0                        # held at a release within LINGER_S of the one before


class MemoryTurnSlots:
    """The same rules in memory, for the brain's unit tests. `limits` are per tenant, else
    `default_limit`. `sweep` only re-offers the sessions granted in their absence: what it
    drops in Postgres needs the archive's view of the sessions."""

    def __init__(self, default_limit: int | None = None, limits: dict[str, int] | None = None,
                 total: int | None = None, clock: Callable[[], float] = time.monotonic):
        self.default_limit, self.limits, self.total, self.clock = default_limit, dict(limits or {}), total, clock
        self.tenants: dict[str, _Tenant] = {}

    def _limit(self, tenant: str) -> int | None:
        now = self.clock()
        active = {name for name, t in self.tenants.items() if t.slots or t.queue}
        gone = {name: t.peak for name, t in self.tenants.items()
                if name not in active and now - t.released_at < LINGER_S}
        others = sum(len(t.slots) for name, t in self.tenants.items() if name != tenant)
        return share(self.limits.get(tenant, self.default_limit), self.total, others,
                     len(active | set(gone) | {tenant}), [peak for name, peak in gone.items() if name != tenant])

    def _promote(self, tenant: str) -> tuple[str, ...]:
        t, lim, woken = self.tenants[tenant], self._limit(tenant), []
        while t.queue and (lim is None or len(t.slots) < lim):
            head, _ = t.queue.popitem(last=False)
            t.slots.setdefault(head, False)
            woken.append(head)
        return tuple(woken)

    async def take(self, tenant: str, session_id: str) -> SlotAnswer:
        t = self.tenants.setdefault(tenant, _Tenant())
        lim = self._limit(tenant)
        if session_id in t.slots:
            t.slots[session_id] = True
            return SlotAnswer(True, len(t.slots), lim)
        woken = self._promote(tenant)
        if session_id in woken:
            t.slots[session_id] = True
            return SlotAnswer(True, len(t.slots), lim, tuple(w for w in woken if w != session_id))
        if (lim is None or len(t.slots) < lim) and not t.queue:
            t.slots[session_id] = True
            return SlotAnswer(True, len(t.slots), lim, woken)
        t.queue.setdefault(session_id, None)
        return SlotAnswer(False, len(t.slots), lim, woken)

    async def release(self, tenant: str, session_id: str) -> tuple[str, ...]:
        t = self.tenants.setdefault(tenant, _Tenant())
        if self.total is not None and session_id in t.slots:
            now = self.clock()
            t.peak = max(t.peak, len(t.slots)) if now - t.released_at < LINGER_S else len(t.slots)
            t.released_at = now
        t.slots.pop(session_id, None)
        t.queue.pop(session_id, None)
        return self._promote(tenant)

    async def keep(self, tenant: str, session_id: str) -> SlotAnswer:
        t = self.tenants.setdefault(tenant, _Tenant())
        if self.total is None:
            return SlotAnswer(True, len(t.slots), self._limit(tenant))
        if session_id not in t.slots:
            return await self.take(tenant, session_id)
        lim = self._limit(tenant)
        if lim is None or len(t.slots) <= lim:
            return SlotAnswer(True, len(t.slots), lim)
        del t.slots[session_id]
        t.queue.setdefault(session_id, None)
        return SlotAnswer(False, len(t.slots), lim)

    async def sweep(self) -> list[tuple[str, str]]:
        return [(name, s) for name, t in self.tenants.items() for s, started in t.slots.items() if not started]
