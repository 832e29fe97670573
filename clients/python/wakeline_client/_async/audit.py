"""`client.audit` (auditor, admin): events across the tenant's sessions, their cost, the
hash chains, the access log; and `client.tenant`: the retention window and the quotas."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from wakeline_client import models as m
from wakeline_client import operations as ops
from wakeline_client._async.http import AsyncHttp


class AsyncAudit:
    def __init__(self, http: AsyncHttp):
        self._http = http

    async def events(self, **filters: Any) -> m.AuditEventsPublic:
        """`filters`: actor, principal, since, until, type, tool, session_id, outcome, limit, cursor."""
        return await self._http.call(ops.AUDIT_EVENTS, query=_known(ops.AUDIT_EVENTS, filters))

    async def export(self, *, format: str = "jsonl", **filters: Any) -> AsyncIterator[str]:
        """Every match as JSON lines (or CSV rows), read as they come."""
        query = {**_known(ops.EXPORT_AUDIT_EVENTS, filters), "format": format}
        async with self._http.stream(ops.EXPORT_AUDIT_EVENTS, query=query) as response:
            async for line in response.aiter_lines():
                if line:
                    yield line

    async def sessions(self, **filters: Any) -> m.AuditSessionsPublic:
        return await self._http.call(ops.AUDIT_SESSIONS, query=_known(ops.AUDIT_SESSIONS, filters))

    async def cost(self, *, since: str | None = None, until: str | None = None) -> m.TenantCostPublic:
        return await self._http.call(ops.TENANT_COST, query={"since": since, "until": until})

    async def verify(self, *, timeout: float | None = 900.0) -> m.TenantReport:
        """Every session's chain: linear in the tenant's events, so a long wait by default."""
        return await self._http.call(ops.VERIFY_TENANT, timeout=timeout)

    async def access_log(self, **filters: Any) -> m.AccessLogPublic:
        """`filters`: since, until, principal, after, limit (admin)."""
        return await self._http.call(ops.ACCESS_LOG, query=_known(ops.ACCESS_LOG, filters))


class AsyncTenant:
    def __init__(self, http: AsyncHttp):
        self._http = http

    async def retention(self) -> m.RetentionPublic:
        return await self._http.call(ops.READ_RETENTION)

    async def set_retention(self, keep_days: int) -> m.RetentionPublic:
        return await self._http.call(ops.SET_RETENTION, body=m.RetentionSet(keep_days=keep_days))

    async def quotas(self) -> m.QuotasPublic:
        """The quotas the key's tenant runs under: its own, the defaults, what applies, the changes."""
        return await self._http.call(ops.READ_QUOTAS)

    async def set_quotas(self, **quotas: int | None) -> m.QuotasPublic:
        """Replaces the tenant's quotas (admin): `running_sessions`, `sessions_per_minute`,
        `commands_per_second`, `tool_calls_in_flight`, `tokens_per_day`; one left out or None
        goes back to the gateway's default."""
        return await self._http.call(ops.SET_QUOTAS, body=m.QuotasSet(**quotas))


def _known(op: ops.Operation, filters: dict[str, Any]) -> dict[str, Any]:
    unknown = set(filters) - set(op.query)
    if unknown:
        raise TypeError(f"{op.path} takes no {', '.join(sorted(unknown))}; it takes {', '.join(op.query)}")
    return filters
