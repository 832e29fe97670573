"""`wakeline-gateway` (or `python -m wakeline_gateway`): serve the HTTP API with uvicorn."""

from __future__ import annotations

import uvicorn

from wakeline.runtime import logs, tracing
from wakeline.runtime.metrics import serve_metrics
from wakeline_gateway.app import create_app
from wakeline_gateway.settings import GatewaySettings


def main() -> None:
    settings = GatewaySettings()
    logs.configure("gateway", settings.log_format)
    serve_metrics(settings, "gateway")
    tracing.configure("gateway", settings)
    # JSON: uvicorn's own loggers go through the root's handler too (log_config=None).
    extra = {"log_config": None} if settings.log_format == "json" else {}
    # httptools parses HTTP/1.1 (a dependency, as uvloop is), not uvicorn's pure-Python h11.
    uvicorn.run(create_app(settings), host=settings.http_host, port=settings.http_port,
                loop=settings.event_loop, http="httptools", **extra)


if __name__ == "__main__":
    main()
