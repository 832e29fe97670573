# GENERATED from wakeline_client/_async/audit.py by clients/python/codegen/unasync.py: do not edit.
"""`client.audit` (auditor, admin): events across the tenant's sessions, their cost, the
hash chains, the access log; and `client.tenant`: the retention window and the quotas."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from wakeline_client import models as m
from wakeline_client import operations as ops
from wakeline_client._sync.http import Http


class Audit:
    def __init__(self, http: Http):
        self._http = http

    def events(self, **filters: Any) -> m.AuditEventsPublic:
        """`filters`: actor, principal, since, until, type, tool, session_id, outcome, limit, cursor."""
        return self._http.call(ops.AUDIT_EVENTS, query=_known(ops.AUDIT_EVENTS, filters))

    def export(self, *, format: str = "jsonl", **filters: Any) -> Iterator[str]:
        """Every match as JSON lines (or CSV rows), read as they come."""
        query = {**_known(ops.EXPORT_AUDIT_EVENTS, filters), "format": format}
        with self._http.stream(ops.EXPORT_AUDIT_EVENTS, query=query) as response:
            for line in response.iter_lines():
                if line:
                    yield line

    def sessions(self, **filters: Any) -> m.AuditSessionsPublic:
        return self._http.call(ops.AUDIT_SESSIONS, query=_known(ops.AUDIT_SESSIONS, filters))

    def cost(self, *, since: str | None = None, until: str | None = None) -> m.TenantCostPublic:
        return self._http.call(ops.TENANT_COST, query={"since": since, "until": until})

    def verify(self, *, timeout: float | None = 900.0) -> m.TenantReport:
        """Every session's chain: linear in the tenant's events, so a long wait by default."""
        return self._http.call(ops.VERIFY_TENANT, timeout=timeout)

    def access_log(self, **filters: Any) -> m.AccessLogPublic:
        """`filters`: since, until, principal, after, limit (admin)."""
        return self._http.call(ops.ACCESS_LOG, query=_known(ops.ACCESS_LOG, filters))


class Tenant:
    def __init__(self, http: Http):
        self._http = http

    def retention(self) -> m.RetentionPublic:
        return self._http.call(ops.READ_RETENTION)

    def set_retention(self, keep_days: int) -> m.RetentionPublic:
        return self._http.call(ops.SET_RETENTION, body=m.RetentionSet(keep_days=keep_days))

    def quotas(self) -> m.QuotasPublic:
        """The quotas the key's tenant runs under: its own, the defaults, what applies, the changes."""
        return self._http.call(ops.READ_QUOTAS)

    def set_quotas(self, **quotas: int | None) -> m.QuotasPublic:
        """Replaces the tenant's quotas (admin): `running_sessions`, `sessions_per_minute`,
        `commands_per_second`, `tool_calls_in_flight`, `tokens_per_day`; one left out or None
        goes back to the gateway's default."""
        return self._http.call(ops.SET_QUOTAS, body=m.QuotasSet(**quotas))


def _known(op: ops.Operation, filters: dict[str, Any]) -> dict[str, Any]:
    unknown = set(filters) - set(op.query)
    if unknown:
        raise TypeError(f"{op.path} takes no {', '.join(sorted(unknown))}; it takes {', '.join(op.query)}")
    return filters
