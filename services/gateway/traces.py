"""The gateway's end of a trace (wakeline.tracing): a server span per HTTP request, current
while the route runs, so the inbox record a command route sends carries its context. Named
by the route template once the router has matched it. A no-op unless tracing is configured.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import SpanKind

from wakeline import tracing


class HttpTracing:
    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with tracing.TRACER.start_as_current_span(scope["method"], kind=SpanKind.SERVER) as span:
            try:
                await self.app(scope, receive, send)
            finally:
                route = getattr(scope.get("route"), "path", None) or "unmatched"
                span.update_name(f"{scope['method']} {route}")
                span.set_attribute("http.route", route)
