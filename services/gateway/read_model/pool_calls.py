"""The pool's read model: the tool calls of a tenant's sessions that wait for a harness and
that no live lease holds, the candidates `pool.Leases.take` leases to a worker.

It reads `sessions` (the waiting ones, by their projection row) and `events` (each call, and
whether a result or an approval answers it), so it lives with the gateway's other reads of
those tables; `pool.py` keeps the leases themselves (`tool_call_leases`), and runs this in
the transaction that counts what the worker holds, before it takes the leases in statements
of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

# When the oldest of the tenant's sessions waiting for a harness was created, less three
# hours' slack (below); NULL when none waits. The partial index 0025 made answers it from the
# waiting sessions alone, so a worker polling an idle pool costs Postgres next to nothing. The
# search below is planned over every monthly partition four times: 12 ms to plan on a year's
# partitions (21 ms on 53), ten times a second per connected worker, whether anything waited
# or not (a take with nothing waiting: 14.4 ms before, 1.0 ms after; docs/benchmarks.md).
OLDEST_WAITING = """
SELECT min(created_at) - interval '3 hours' FROM sessions
 WHERE tenant = $1 AND pending_client > 0 AND status = 'waiting_client'
"""
# Calls waiting for a harness, oldest session first, that no live lease holds. Runs under
# the tenant's row-level security; the partial index 0025 made finds the waiting sessions.
# Every read of `events` is bounded below by time (a call comes after its session's
# creation, a result or approval after its call; an hour's slack for brains whose clocks
# disagree), so only the months since are read: unbounded, each probe went through every
# monthly partition, 15 ms of execution for 100 waiting sessions (EXPLAIN ANALYZE). The same
# bound as a value, $4 (`OLDEST_WAITING`: the oldest waiting session's creation, less three
# hours, since a grant comes after its request, after its call, after the session's creation,
# an hour's slack each), lets the planner leave the months before it out of the plan too: an
# expression of it (`$4 - interval`) is only stable, and was pruned at run time, after every
# month was planned. It is implied by the per-row bounds: it changes what is planned, never
# what is found. The tool is matched in the payload, not by `tool_name`, and the call's tenant
# is the session's (and row-level security's), not said again: either drew the planner to a
# (tenant, ...) index, every call of the tenant for each session, rather than the session's
# own by its key.
OFFERABLE = """
SELECT c.session_id, c.seq, c.payload->>'tool_call_id' AS tool_call_id, c.tool_name AS name,
       c.payload->'input' AS input
  FROM sessions s
  JOIN events c ON c.session_id = s.session_id AND c.type = 'tool_call' AND c.ts >= s.created_at - interval '1 hour'
                   AND c.ts >= $4
 WHERE s.tenant = $1 AND s.pending_client > 0 AND s.status = 'waiting_client'
   AND c.payload->>'answered_by' = 'client' AND c.payload->>'name' = ANY($2::text[])
   AND NOT EXISTS (SELECT 1 FROM events r WHERE r.session_id = c.session_id AND r.type = 'tool_result'
                     AND r.ts >= c.ts - interval '1 hour' AND r.ts >= $4
                     AND r.seq > c.seq AND r.payload->>'tool_call_id' = c.payload->>'tool_call_id')
   AND NOT EXISTS (SELECT 1 FROM events a WHERE a.session_id = c.session_id AND a.type = 'approval_requested'
                     AND a.ts >= c.ts - interval '1 hour' AND a.ts >= $4
                     AND a.seq > c.seq AND a.payload->>'tool_call_id' = c.payload->>'tool_call_id'
                     AND NOT EXISTS (SELECT 1 FROM events g WHERE g.session_id = c.session_id
                                       AND g.type = 'approval_granted' AND g.ts >= a.ts - interval '1 hour'
                                       AND g.ts >= $4 AND g.seq > a.seq
                                       AND g.payload->>'tool_call_id' = a.payload->>'tool_call_id'))
   AND NOT EXISTS (SELECT 1 FROM tool_call_leases l WHERE l.tenant = $1 AND l.session_id = c.session_id
                     AND l.tool_call_id = c.payload->>'tool_call_id' AND l.expires_at > now())
 ORDER BY s.updated_at, c.session_id, c.seq
 LIMIT $3
"""


async def offerable(conn: asyncpg.Connection, tenant: str, tools: Sequence[str], limit: int) -> list[asyncpg.Record]:
    """At most `limit` calls on offer to a worker for `tools`, in the caller's transaction
    (`conn`, bound to `tenant`): session_id, seq, tool_call_id, name and input of each."""
    oldest = await conn.fetchval(OLDEST_WAITING, tenant)
    if oldest is None:
        return []
    return await conn.fetch(OFFERABLE, tenant, list(tools), limit, oldest)
