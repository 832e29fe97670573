"""`AuditStore`: the audit read model (`read_model/audit.py`: the audit queries, an export a
page at a time, the tenant's model cost) and, here, the access log of audit reads and the
tenant's retention window. Those tables are not `events` or `sessions`, so their SQL stays
beside the audit routes rather than in the read model; what a query asks is `query.py`'s."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from wakeline_gateway.read_model.audit import AuditReads


class AuditStore(AuditReads):
    """The audit reads (`AuditReads`) and what the audit routes keep besides: the access log
    and the tenant's retention window."""

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
