"""HTTP latency by route for the gateway's metrics (declared below): a pure ASGI
middleware (a streamed response is timed until it closes, and nothing is buffered), labelled
with the route's path template as the router matched it, never the raw path, so the label
values stay as few as the routes; a request no route matched is `unmatched`.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import Histogram

from wakeline.runtime import metrics

# This service's metrics (names, labels and buckets: docs/operations.md says what each means).
HTTP_SECONDS = Histogram("wakeline_http_request_seconds", "Gateway requests, received to the last byte of the "
                         "response sent (a stream: until it closes)", ["method", "route", "status"],
                         buckets=metrics.SECONDS)


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
