"""The audit read model: `AuditReads`, the audit queries across a tenant's sessions, the SQL
they run, an export a page at a time and the tenant's model cost.

What an auditor asked is `audit/query.py`'s `AuditQuery` (pure); here it becomes SQL on
`events` and `sessions`, run in the tenant's transaction. `audit/store.py`'s `AuditStore`
adds the access log and the retention window, which are not reads of these tables.

Pages are keyset-paged in (ts, session_id, seq) order (the cursor is `audit/query.py`'s).
With tenant and one actor fixed, the `events_tenant_actor_ts` index (0023) yields rows in
ts order and an incremental sort orders each run of equal ts, so a first page reads about
`limit` index entries per month instead of sorting every match.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import asyncpg

from wakeline.storage.event_rows import SELECT_LIST, event_from_row
from wakeline.contract.events import Event
from wakeline.storage.pg import TenantPool
from wakeline_gateway.audit.query import AuditQuery

EXPORT_PAGE = 1000


def filters(tenant: str, query: AuditQuery) -> tuple[list[str], list[Any]]:
    """WHERE clauses (AND-ed) and their arguments, $1 first."""
    # tenant is also RLS's; said here too so the planner can use it as an index bound.
    where, args = ["tenant = $1"], [tenant]

    def add(clause: str, value: Any) -> None:
        args.append(value)
        where.append(clause.replace("?", f"${len(args)}"))

    if len(query.actors) == 1:  # equality keeps the index order; ANY would need a sort
        add("actor = ?", query.actors[0])
    elif query.actors:
        add("actor = ANY(?::text[])", list(query.actors))
    if query.since is not None:
        add("ts >= ?", query.since)
    if query.until is not None:
        add("ts < ?", query.until)
    if query.types:
        add("type = ANY(?::text[])", list(query.types))
    if query.tool is not None:
        add("tool_name = ?", query.tool)
    if query.session_id is not None:
        add("session_id = ?", query.session_id)
    if query.outcome is not None:
        add("is_error = ?", query.outcome == "error")
    return where, args


def events_sql(tenant: str, query: AuditQuery) -> tuple[str, list[Any]]:
    where, args = filters(tenant, query)
    if query.after is not None:
        args.extend(query.after)
        n = len(args)
        where.append(f"(ts, session_id, seq) > (${n - 2}, ${n - 1}, ${n})")
    args.append(query.limit)
    return (f"SELECT {SELECT_LIST} FROM events WHERE {' AND '.join(where)} "
            f"ORDER BY ts, session_id, seq LIMIT ${len(args)}"), args


def sessions_sql(tenant: str, query: AuditQuery) -> tuple[str, list[Any]]:
    where, args = filters(tenant, query)
    args.append(query.limit)
    return ("SELECT e.session_id, min(e.ts) AS first_ts, max(e.ts) AS last_ts, count(*) AS events, "
            "array_agg(DISTINCT e.type ORDER BY e.type) AS types, "
            "array_agg(DISTINCT e.actor ORDER BY e.actor) AS actors, s.owner, s.title, s.deleted_at, "
            "s.parent_session_id, s.fork_seq "
            f"FROM (SELECT session_id, ts, type, actor FROM events WHERE {' AND '.join(where)}) e "
            "LEFT JOIN sessions s ON s.session_id = e.session_id "
            "GROUP BY e.session_id, s.owner, s.title, s.deleted_at, s.parent_session_id, s.fork_seq "
            f"ORDER BY min(e.ts), e.session_id LIMIT ${len(args)}"), args


# Model calls of the tenant in [since, until), summed per (session owner, model, UTC day)
# and per token count the calls recorded (every integer field of `usage`: cache tokens too).
# A model call is a model turn or a summary the model wrote for a compaction (its actor is
# agent:<model> and it records its usage), as a session's own cost (`cost.session_cost`) counts.
COST_SQL = """
SELECT s.owner AS actor, substr(e.actor, 7) AS model, (e.ts AT TIME ZONE 'UTC')::date AS day,
       u.key AS token, sum(u.value::bigint) AS tokens, count(*) AS calls
FROM events e JOIN sessions s ON s.session_id = e.session_id,
     jsonb_each_text(coalesce(e.payload->'usage', '{}'::jsonb)) AS u
WHERE (e.type = 'model_turn' OR (e.type = 'compaction' AND e.payload ? 'summary_model'))
  AND e.actor LIKE 'agent:%' AND e.ts >= $1 AND e.ts < $2
  AND u.value ~ '^[0-9]+$'
GROUP BY 1, 2, 3, 4 ORDER BY 3, 1, 2, 4
"""


class AuditReads:
    def __init__(self, pool: TenantPool):
        self._pool = pool

    async def events(self, tenant: str, query: AuditQuery) -> list[Event]:
        sql, args = events_sql(tenant, query)
        async with self._pool.transaction(tenant) as conn:
            rows = await conn.fetch(sql, *args)
        return [event_from_row(row) for row in rows]

    async def every_event(self, tenant: str, query: AuditQuery) -> AsyncIterator[Event]:
        """Every match, a keyset page per transaction (a long export holds no snapshot)."""
        page_query = AuditQuery(**{**query.__dict__, "limit": EXPORT_PAGE})
        while True:
            page = await self.events(tenant, page_query)
            for event in page:
                yield event
            if len(page) < EXPORT_PAGE:
                return
            last = page[-1]
            page_query = AuditQuery(**{**page_query.__dict__, "after": (last.ts, last.session_id, last.seq)})

    async def sessions(self, tenant: str, query: AuditQuery) -> list[asyncpg.Record]:
        """The sessions the query's events touch, each with when and how much."""
        sql, args = sessions_sql(tenant, query)
        async with self._pool.transaction(tenant) as conn:
            return await conn.fetch(sql, *args)

    async def cost(self, tenant: str, since: datetime, until: datetime) -> list[dict[str, Any]]:
        """Tokens and model calls per (owner, model, day) over [since, until)."""
        async with self._pool.transaction(tenant) as conn:
            rows = await conn.fetch(COST_SQL, since, until)
        groups: dict[tuple[str, str, Any], dict[str, Any]] = {}
        for r in rows:
            group = groups.setdefault((r["actor"], r["model"], r["day"]), {
                "actor": r["actor"], "model": r["model"], "day": r["day"], "calls": 0, "tokens": {}})
            group["tokens"][r["token"]] = r["tokens"]
            group["calls"] = max(group["calls"], r["calls"])
        return list(groups.values())
