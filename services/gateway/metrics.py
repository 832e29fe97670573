"""What feeds the gateway's metrics (declared below): HTTP latency by route, a pure ASGI
middleware (a streamed response is timed until it closes, and nothing is buffered), labelled
with the route's path template as the router matched it, never the raw path, so the label
values stay as few as the routes; a request no route matched is `unmatched`. And the commands
refused by a quota, counted by a wrapper of the quota gate, per tenant and quota: a tenant
label is bounded by the tenants an operator created, and "which tenant is throttled" is the
question. And each tenant's open sessions by status, sampled from the `sessions` projection
(`tenant_session_counts`, migration 0029): the same bound, times the statuses a session is
in before it ends (idle, running, waiting_model, waiting_client, queued, ...).
"""

from __future__ import annotations

import time
from typing import Any

import asyncpg
from prometheus_client import Counter, Gauge, Histogram

from wakeline.contract.commands import CommandBase
from wakeline.runtime import metrics
from wakeline.storage.pg import TenantPool
from wakeline_gateway.quotas.gate import Admission, QuotaExceeded

# This service's metrics (names, labels and buckets: docs/operations.md says what each means).
HTTP_SECONDS = Histogram("wakeline_http_request_seconds", "Gateway requests, received to the last byte of the "
                         "response sent (a stream: until it closes)", ["method", "route", "status"],
                         buckets=metrics.SECONDS)
QUOTA_REFUSALS = Counter("wakeline_gateway_quota_rejections_total", "Commands the gateway refused (429) because "
                         "the tenant was over a rate quota; nothing was sent", ["tenant", "quota"])
TENANT_SESSIONS = Gauge("wakeline_tenant_sessions", "The tenant's sessions that have not ended (nor been deleted), "
                        "by status as the sessions projection has it; sampled", ["tenant", "status"])


async def _open_sessions(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return await conn.fetch("SELECT tenant, status, sessions FROM tenant_session_counts()")


async def sample_tenant_sessions(pool: TenantPool) -> None:
    """Every tenant's open sessions by status; a (tenant, status) no longer present is dropped."""
    rows = await pool.system_statement(_open_sessions)
    present = {(r["tenant"], r["status"]): r["sessions"] for r in rows}
    for labels, count in present.items():
        TENANT_SESSIONS.labels(*labels).set(count)
    for labels in metrics.children(TENANT_SESSIONS):
        if labels not in present:
            TENANT_SESSIONS.remove(*labels)


class CountedRefusals:
    """The quota gate, as the dispatcher uses it, with every refusal counted."""

    def __init__(self, gate: Admission):
        self._gate = gate

    async def admit(self, command: CommandBase) -> None:
        try:
            await self._gate.admit(command)
        except QuotaExceeded as refused:
            QUOTA_REFUSALS.labels(refused.tenant, refused.quota).inc()
            raise


class HttpMetrics:
    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began, status = time.monotonic(), 500

        async def sent(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)
        try:
            await self.app(scope, receive, sent)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            HTTP_SECONDS.labels(scope["method"], route, str(status)).observe(time.monotonic() - began)
