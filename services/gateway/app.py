"""The composition root: `create_app(settings)` builds the FastAPI app; nothing at import.

The lifespan opens the tenant-scoped Postgres pool, the Kafka producer and the events and
model-deltas feeds (unless `events_feed` is off) and closes them on shutdown; routes reach them only through
`deps.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig

from wakeline.runtime import metrics

from wakeline.contract.prices import PriceTable
from wakeline.transport.kafka_io import make_producer
from wakeline.storage.pg import TenantPool
from wakeline.storage.quota_counts import QuotaCounts
from wakeline.storage.postgres_store import PostgresEventStore
from wakeline.contract.topics import INBOX
from wakeline_gateway.bodylimit import BodyLimit, body_cap
from wakeline_gateway.errors import install_error_handlers
from wakeline_gateway.openapi import problem_openapi
from wakeline_gateway.feed import DeltasFeed, EventsFeed, FeedState, feed_consumer
from wakeline_gateway.inbox import Inbox
from wakeline_gateway.listeners import Listeners
from wakeline_gateway.metrics import CountedRefusals, HttpMetrics, sample_tenant_sessions
from wakeline_gateway.pool import Leases
from wakeline_gateway.quotas.gate import QuotaGate
from wakeline_gateway.quotas.store import QuotaStore
from wakeline_gateway.audit.store import AuditStore
from wakeline_gateway.read_model.sessions import SessionStore
from wakeline_gateway.routes import (
    audit, commands, console, forks, health, me, quotas, reads, sessions, stream, tenant, tool_calls,
)
from wakeline_gateway.settings import GatewaySettings


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: GatewaySettings = app.state.settings
    async with TenantPool(settings.postgres_dsn, "wakeline-gateway", min_size=1,
                          max_size=settings.pool_max_size) as pool:
        # Each record is one request waiting for its answer: nothing to gain by lingering.
        producer = make_producer(settings, linger_ms=0)
        await producer.start()
        sampling: list[asyncio.Task[None]] = []
        try:
            app.state.store = SessionStore(pool, PostgresEventStore(pool))
            app.state.audit = AuditStore(pool)
            app.state.leases = Leases(pool)
            app.state.quotas = QuotaStore(pool)
            app.state.quota_gate = CountedRefusals(QuotaGate(QuotaCounts(pool, settings.quota_defaults())))
            app.state.inbox = Inbox(producer, settings.partitions)
            if settings.metrics_enabled:
                sampling.append(metrics.every(settings.tenant_sessions_sample_s, lambda: sample_tenant_sessions(pool)))
            async with events_feed(settings) as feed:
                app.state.feed = feed
                yield
        finally:
            for task in sampling:
                task.cancel()
            await asyncio.gather(*sampling, return_exceptions=True)
            await producer.stop()


@asynccontextmanager
async def events_feed(settings: GatewaySettings) -> AsyncIterator[FeedState]:
    listeners = Listeners(settings.stream_queue_size)
    if not settings.events_feed:
        yield FeedState(listeners)
        return
    async with EventsFeed(feed_consumer(settings), settings.partitions, listeners) as feed, \
            DeltasFeed(feed_consumer(settings), settings.partitions, listeners) as deltas:
        yield FeedState(listeners, feed, deltas)


DESCRIPTION = (f"Commands go to {INBOX}; reads come from Postgres. Every error is an RFC 9457 "
               "problem (`application/problem+json`) with a machine-readable `code`.")


def create_app(settings: GatewaySettings) -> FastAPI:
    # FastAPI's own OpenTelemetry spans (fastapi.telemetry): a server span per request, named by
    # its route template, with the dependency, endpoint and serialization spans beneath it; the
    # command routes send their inbox records inside them, so the records carry that context.
    # Made only once wakeline.runtime.tracing has installed a provider. Metrics are Prometheus
    # (HttpMetrics), logs wakeline.runtime.logs: FastAPI's OpenTelemetry metrics and logs stay off.
    telemetry: TelemetryConfig = {"tracing": True, "operation_spans": True, "metrics": False, "logs": False,
                                  "auto_configure": False}
    app = FastAPI(title="Wakeline gateway", version="0.1.0", lifespan=lifespan, description=DESCRIPTION,
                  telemetry=telemetry)
    app.state.settings = settings
    app.state.prices = PriceTable.with_overrides(settings.model_prices)  # a malformed entry stops the start
    install_error_handlers(app)
    app.add_middleware(BodyLimit, cap=body_cap(settings.max_record_bytes))
    app.add_middleware(HttpMetrics)  # outermost: times what the body limit refuses too
    for module in (sessions, forks, commands, tool_calls, reads, stream, audit, tenant, quotas, health, me, console):
        app.include_router(module.router)
    app.openapi = lambda: problem_openapi(app)  # type: ignore[method-assign]
    return app
