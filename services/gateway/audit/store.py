"""`AuditStore`: audit queries run in the tenant's transaction, an export a page at a time,
the tenant's model cost, the access log of audit reads, and the tenant's retention window.
What a query asks and its SQL are `query.py`'s."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import asyncpg

from wakeline.storage.event_rows import event_from_row
from wakeline.contract.events import Event
from wakeline.storage.pg import TenantPool
from wakeline_gateway.audit.query import AuditQuery, events_sql, sessions_sql

EXPORT_PAGE = 1000


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


class AuditStore:
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

    async def record_access(self, tenant: str, principal: str, role: str, key_id: str,
                            method: str, path: str, asked: dict[str, Any]) -> None:
        """Appends to the access log; committed before the answer starts."""
        async with self._pool.transaction(tenant) as conn:
            await conn.execute(
                "INSERT INTO audit_access_log (tenant, principal, role, key_id, method, path, query) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)",
                tenant, principal, role, key_id, method, path, json.dumps(asked, sort_keys=True, default=str))

    async def access_log(self, tenant: str, since: datetime | None, until: datetime | None,
                         principal: str | None, limit: int, after_id: int | None) -> list[dict[str, Any]]:
        async with self._pool.transaction(tenant) as conn:
            rows = await conn.fetch(
                "SELECT id, principal, role, key_id, at, method, path, query FROM audit_access_log "
                "WHERE ($1::timestamptz IS NULL OR at >= $1) AND ($2::timestamptz IS NULL OR at < $2) "
                "AND ($3::text IS NULL OR principal = $3) AND ($4::bigint IS NULL OR id > $4) "
                "ORDER BY id LIMIT $5", since, until, principal, after_id, limit)
        return [{**dict(row), "query": json.loads(row["query"])} for row in rows]

    async def retention(self, tenant: str) -> dict[str, Any]:
        """The tenant's window (None: only the operator's default applies) and its history."""
        async with self._pool.transaction(tenant) as conn:
            current = await conn.fetchrow(
                "SELECT extract(epoch FROM keep) / 86400 AS keep_days, set_by, set_at "
                "FROM retention_policies WHERE tenant = $1", tenant)
            history = await conn.fetch(
                "SELECT extract(epoch FROM keep) / 86400 AS keep_days, set_by, set_at "
                "FROM retention_policy_changes ORDER BY id", )
        return {"keep_days": float(current["keep_days"]) if current else None,
                "set_by": current["set_by"] if current else None, "set_at": current["set_at"] if current else None,
                "history": [{**dict(r), "keep_days": float(r["keep_days"])} for r in history]}

    async def set_retention(self, tenant: str, keep_days: int, by: str) -> None:
        """Upserts the window; the database appends the change to retention_policy_changes."""
        async with self._pool.transaction(tenant) as conn:
            await conn.execute(
                "INSERT INTO retention_policies (tenant, keep, set_by, set_at) "
                "VALUES ($1, make_interval(days => $2), $3, now()) ON CONFLICT (tenant) DO UPDATE "
                "SET keep = EXCLUDED.keep, set_by = EXCLUDED.set_by, set_at = EXCLUDED.set_at",
                tenant, keep_days, by)
