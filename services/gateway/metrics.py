"""What feeds the gateway's metrics (declared below): HTTP latency by route, a pure ASGI
middleware (a streamed response is timed until it closes, and nothing is buffered), labelled
with the route's path template as the router matched it, never the raw path, so the label
values stay as few as the routes; a request no route matched is `unmatched`. And the commands
refused by a quota, counted by a wrapper of the quota gate, per tenant and quota: a tenant
label is bounded by the tenants an operator created, and "which tenant is throttled" is the
question.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import Counter, Histogram

from wakeline.contract.commands import CommandBase
from wakeline.runtime import metrics
from wakeline_gateway.quotas.gate import Admission, QuotaExceeded

# This service's metrics (names, labels and buckets: docs/operations.md says what each means).
HTTP_SECONDS = Histogram("wakeline_http_request_seconds", "Gateway requests, received to the last byte of the "
                         "response sent (a stream: until it closes)", ["method", "route", "status"],
                         buckets=metrics.SECONDS)
QUOTA_REFUSALS = Counter("wakeline_gateway_quota_rejections_total", "Commands the gateway refused (429) because "
                         "the tenant was over a rate quota; nothing was sent", ["tenant", "quota"])


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
