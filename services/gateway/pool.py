"""A pool of harness workers: the tenant's declared tools' calls, each to one worker at a time.

`GET /v1/tool-calls/stream?tools=a,b` offers every call of the tenant's sessions that waits
for its harness, whose tool is one of `tools`, to one connected worker under a lease in
Postgres (`tool_call_leases`, 0025), where every gateway replica sees it. The lease is
renewed while the worker stays connected and given back when it goes; one whose gateway
died runs out after `lease_s`. Either way the call is offered again. Delivery is at least
once; the result is recorded once (the brain answers a second result `not_pending`, and
the results route compares it with what was recorded).

What is pending comes from the archive: a session counted `pending_client > 0` (its
projection row) and, in it, a client call with no result and no approval still awaited
(`read_model/pool_calls.py`, the gateway's read model; here only the leases' own SQL).
The search runs every `poll_s`, and at once after a lease is given back.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from wakeline.storage.pg import TenantPool
from wakeline_gateway.read_model.pool_calls import offerable

SPREAD = 4  # candidates looked at per call a worker has room for
ATTEMPTS = 4  # of a lease write Postgres aborted as a deadlock or serialization failure
# Every statement that writes several leases locks them in one order, (session_id, tool_call_id)
# by code point (Python's order of str, Postgres's COLLATE "C"): two that meet then wait for each
# other, never deadlock. Taken one by one in a transaction, in orders of their own, two workers'
# takes deadlocked (CI, 2026-12-06), and so did a take with another worker's renewal.
ORDERED = 'ORDER BY session_id COLLATE "C", tool_call_id COLLATE "C" FOR UPDATE'
# Taken only where no live lease is: a lease that ran out is taken over, one held is not. The
# rows come sorted (`Leases.take`) and are inserted in the order given.
TAKE = """
INSERT INTO tool_call_leases (tenant, session_id, tool_call_id, worker, expires_at)
SELECT $1, k.session_id, k.tool_call_id, $4, now() + make_interval(secs => $5)
  FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS k(session_id, tool_call_id, n)
 ORDER BY k.n
ON CONFLICT (tenant, session_id, tool_call_id) DO UPDATE
   SET worker = EXCLUDED.worker, leased_at = now(), expires_at = EXCLUDED.expires_at
 WHERE tool_call_leases.expires_at <= now()
RETURNING session_id, tool_call_id, expires_at
"""
# Each locks its rows in the order above first (the sorted, locking subquery), then writes them.
_KEYS = "l.tenant = $1 AND l.session_id = k.session_id AND l.tool_call_id = k.tool_call_id"
RENEW = f"""
UPDATE tool_call_leases l SET expires_at = now() + make_interval(secs => $3)
  FROM (SELECT session_id, tool_call_id FROM tool_call_leases WHERE tenant = $1 AND worker = $2 {ORDERED}) k
 WHERE {_KEYS}
"""
GIVE_BACK = f"""
DELETE FROM tool_call_leases l
 USING (SELECT session_id, tool_call_id FROM tool_call_leases WHERE tenant = $1 AND worker = $2 {ORDERED}) k
 WHERE {_KEYS}
"""
HELD = "SELECT count(*) FROM tool_call_leases WHERE tenant = $1 AND worker = $2 AND expires_at > now()"
# An answered call keeps a lease of its own for a while: the archive may not hold its result
# yet, and until it does the search above would offer it again (a needless second delivery).
ANSWERED = """
INSERT INTO tool_call_leases (tenant, session_id, tool_call_id, worker, expires_at)
VALUES ($1, $2, $3, 'answered', now() + interval '10 minutes')
ON CONFLICT (tenant, session_id, tool_call_id) DO UPDATE SET worker = EXCLUDED.worker, expires_at = EXCLUDED.expires_at
"""
# Leases long run out: nothing reads them again (a call with no result is offered anyway).
SWEEP = f"""
DELETE FROM tool_call_leases l
 USING (SELECT session_id, tool_call_id FROM tool_call_leases
         WHERE tenant = $1 AND expires_at < now() - interval '10 minutes' {ORDERED}) k
 WHERE {_KEYS}
"""


async def _never() -> bool:
    return False


@dataclass(frozen=True)
class Offer:
    session_id: str
    tool_call_id: str
    name: str
    input: dict
    seq: int
    lease_expires_at: datetime

    def frame(self) -> str:
        body = {"session_id": self.session_id, "tool_call_id": self.tool_call_id, "name": self.name,
                "input": self.input, "seq": self.seq, "lease_expires_at": self.lease_expires_at.isoformat()}
        return f"event: tool_call\ndata: {json.dumps(body)}\n\n"


class Leases:
    def __init__(self, pool: TenantPool):
        self._pool = pool
        self.aborted = 0  # writes Postgres aborted (and `_write` ran again)

    async def take(self, tenant: str, tools: Sequence[str], worker: str, lease_s: float,
                   in_flight: int) -> list[Offer]:
        """Leases to `worker` calls on offer, until it holds `in_flight` unanswered, and returns them."""
        offers: list[Offer] = []
        async with self._pool.transaction(tenant) as conn:
            room = in_flight - await conn.fetchval(HELD, tenant, worker)
            if room <= 0:
                return offers
            # A window wider than the room, taken in an order of this worker's own: workers that
            # search at once then mostly try different calls, rather than all the same oldest
            # few, where one wins and the others wait on its uncommitted lease to lose.
            rows = await offerable(conn, tenant, tools, room * SPREAD)
        # Tried in this worker's own order, as many at a time as it has room for, each batch
        # one statement (sorted: `ORDERED`) in a transaction of its own.
        untried = random.sample(list(rows), len(rows))
        while untried and len(offers) < room:
            batch, untried = untried[:room - len(offers)], untried[room - len(offers):]
            batch.sort(key=lambda r: (r["session_id"], r["tool_call_id"]))
            taken = await self._write(tenant, TAKE, tenant, [r["session_id"] for r in batch],
                                      [r["tool_call_id"] for r in batch], worker, lease_s)
            until = {(t["session_id"], t["tool_call_id"]): t["expires_at"] for t in taken}
            # Missing from `until`: another worker's lease came first.
            offers += [Offer(r["session_id"], r["tool_call_id"], r["name"], json.loads(r["input"]), r["seq"],
                             until[(r["session_id"], r["tool_call_id"])])
                       for r in batch if (r["session_id"], r["tool_call_id"]) in until]
        return offers

    async def renew(self, tenant: str, worker: str, lease_s: float) -> None:
        await self._write(tenant, RENEW, tenant, worker, lease_s)

    async def held(self, tenant: str, worker: str) -> int:
        """Calls leased to `worker` and not yet answered."""
        async with self._pool.transaction(tenant) as conn:
            return int(await conn.fetchval(HELD, tenant, worker))

    async def sweep(self, tenant: str) -> None:
        await self._write(tenant, SWEEP, tenant)

    async def give_back(self, tenant: str, worker: str) -> None:
        await self._write(tenant, GIVE_BACK, tenant, worker)

    async def answered(self, tenant: str, session_id: str, tool_call_id: str) -> None:
        await self._write(tenant, ANSWERED, tenant, session_id, tool_call_id)

    async def _write(self, tenant: str, sql: str, *args: object) -> list[asyncpg.Record]:
        """One statement in a transaction of its own, run again when Postgres aborted it as a
        deadlock or a serialization failure (class 40: none of it was done; counted in
        `aborted`). The lease writes lock in one order (`ORDERED`), so none is expected; if one
        comes anyway, a worker's stream must not die of it, nor an answer's route fail."""
        attempt = 1
        while True:
            try:
                async with self._pool.transaction(tenant) as conn:
                    return await conn.fetch(sql, *args)
            except asyncpg.TransactionRollbackError:
                self.aborted += 1
                if attempt == ATTEMPTS:
                    raise
                await asyncio.sleep(random.uniform(0, 0.02 * 2 ** attempt))  # apart, not in step again
                attempt += 1


async def pool_frames(leases: Leases, tenant: str, tools: Sequence[str], lease_s: float, poll_s: float,
                      heartbeat_s: float, in_flight: int,
                      gone: Callable[[], Awaitable[bool]] = _never, until_empty: bool = False) -> AsyncIterator[str]:
    """The pool stream of one worker: offers as they are leased to it, at most `in_flight`
    unanswered at once (so one worker never hoards the pool's work), heartbeats between.
    Its leases are renewed every third of `lease_s` and given back when the stream ends
    (the worker went away, or the gateway is shutting down). `gone` says whether the worker
    disconnected: asked every round, since nothing is written to a quiet stream between
    heartbeats to find out, and its leases must go back at once, not at the next heartbeat.
    `until_empty`: the stream ends once nothing is on offer and the worker holds no call
    unanswered (a worker that drains what waits, then exits)."""
    worker = f"worker-{uuid.uuid4()}"
    loop = asyncio.get_running_loop()
    renewed = quiet_since = loop.time()
    yield ": wakeline tool-call pool\n\n"
    try:
        await leases.sweep(tenant)
        while True:
            offers = await leases.take(tenant, tools, worker, lease_s, in_flight)
            for offer in offers:
                yield offer.frame()
            if until_empty and not offers and not await leases.held(tenant, worker):
                return
            now = loop.time()
            if offers:
                quiet_since = now
            elif now - quiet_since >= heartbeat_s:
                yield ": heartbeat\n\n"
                quiet_since = now
            if now - renewed >= lease_s / 3:
                await leases.renew(tenant, worker, lease_s)
                renewed = now
            await asyncio.sleep(poll_s)
            if await gone():
                return
    finally:
        # Shielded: a disconnect cancels this generator, and the leases must still go back.
        await asyncio.shield(leases.give_back(tenant, worker))
