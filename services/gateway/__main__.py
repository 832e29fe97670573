"""`wakeline-gateway` (or `python -m wakeline_gateway`): serve the HTTP API with uvicorn."""

from __future__ import annotations

import logging

import uvicorn

from wakeline.metrics import serve_metrics
from wakeline_gateway.app import create_app
from wakeline_gateway.settings import GatewaySettings


def main() -> None:
    settings = GatewaySettings()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s gateway %(levelname)s %(name)s: %(message)s")
    serve_metrics(settings, "gateway")
    uvicorn.run(create_app(settings), host=settings.http_host, port=settings.http_port)


if __name__ == "__main__":
    main()
