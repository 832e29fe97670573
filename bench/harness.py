"""What the benchmarks share: timing statistics, database connections, producing events."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
from aiokafka import AIOKafkaProducer

from wakeline.contract.codec import encode
from wakeline.contract.events import Event
from wakeline.transport.kafka_io import kafka_auth
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import ARCHIVER_GROUP, EVENTS, partition_for, record_key

ROOT = Path(__file__).resolve().parents[1]


# Each tool call's round trip from the log: the brain's `ts` of the call and of its result.
# The bench's brains count the sessions it creates straight on the inbox (as any Kafka client's)
# against the tenant's quotas, at their cost, but never refuse them: a bench creates hundreds of
# sessions in a minute, past the default 600 a minute.
UNLIMITED_QUOTAS = {"WAKELINE_QUOTA_SESSIONS_PER_MINUTE": "unlimited",
                    "WAKELINE_QUOTA_COMMANDS_PER_SECOND": "unlimited",
                    "WAKELINE_QUOTA_RUNNING_SESSIONS": "unlimited"}
# The bench's brains share the sessions at work fairly across tenants above 20, about what this
# 2-core machine runs at once before every step slows (brain RUNNING_SESSIONS_TOTAL, migration 0032).
# A tenant alone is held to its quota only, so only the fair-share section has a second tenant.
RUNNING_TOTAL = 20
BENCH_BRAIN = {**UNLIMITED_QUOTAS, "WAKELINE_RUNNING_SESSIONS_TOTAL": str(RUNNING_TOTAL)}
# Both sides are the named sessions ($1) since $2 (`log_since`): with only the call side named,
# the results side was every `tool_result` of the tenant, in every month's partition (in the
# demo's database of 2026-12-05, 600k rows and 7.4 s of backend CPU for 100 sessions' calls).
ROUND_TRIPS = ("SELECT c.ts AS called, r.ts AS answered FROM events c JOIN events r"
               " ON r.session_id = c.session_id AND r.type = 'tool_result'"
               " AND r.payload->>'tool_call_id' = c.payload->>'tool_call_id'"
               " WHERE c.session_id = ANY($1) AND c.type = 'tool_call' AND c.ts >= $2"
               " AND r.session_id = ANY($1) AND r.ts >= $2")


def log_since() -> datetime:
    """A lower bound on the `ts` of every event a bench is about to cause (the brain stamps
    them with this machine's clock): lets a read of them skip the older months' partitions."""
    return datetime.now(UTC) - timedelta(minutes=5)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": round(statistics.median(values), 3), "p99": round(percentile(values, 99), 3),
            "min": round(min(values), 3), "max": round(max(values), 3)}


async def superuser(database: str | None = None) -> asyncpg.Connection:
    """The local cluster's superuser over its unix socket (bypasses RLS: the raw baseline), in
    the services' database unless another is named."""
    status = subprocess.run(["bash", str(ROOT / "deploy/postgres/pg.sh"), "status"], capture_output=True, text=True)
    fields = dict(line.split("=", 1) for line in status.stdout.splitlines() if "=" in line)
    return await asyncpg.connect(host=fields["socket_dir"], port=int(fields["port"]), user="postgres",
                                 database=database or CommonSettings().database)


async def service() -> asyncpg.Connection:
    return await asyncpg.connect(CommonSettings().postgres_dsn)


async def archive_caught_up(timeout_s: float = 600.0, topic: str = EVENTS, group: str | None = None) -> dict:
    """Waits until the archive holds every committed event of the events topic (lag 0 on every
    partition, `wakeline_archiver.lag`) and says what it waited for. The archiver of a fresh
    start first reads what earlier runs left behind it (`archiver_throughput`'s own events
    come again to the services' group, a no-op each, but read and looked up all the same):
    measured while it did, the first 3-session round trips' window of the last two runs charged
    98 and 115 ms of archiver CPU to each step, and inserted no row (docs/benchmarks.md,
    twenty-seventh session)."""
    from wakeline_archiver.lag import LagProbe  # the services' package: only the bench imports it here
    from wakeline.storage.pg import TenantPool

    settings = CommonSettings()
    started, first = time.monotonic(), None
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=1) as pool, LagProbe(settings, topic) as probe:
        while True:
            lag = sum(part["lag"] for part in (await probe.measure(pool, group or ARCHIVER_GROUP)).values())
            first = lag if first is None else first
            if lag == 0:
                return {"bench": "archive_caught_up", "lag_at_start": first,
                        "waited_s": round(time.monotonic() - started, 1)}
            if time.monotonic() - started > timeout_s:
                raise RuntimeError(f"the archiver still trails the events topic by {lag} events after {timeout_s} s")
            await asyncio.sleep(0.5)


async def produce_events(settings: CommonSettings, events: list[Event]) -> None:
    """Transactionally, like the brain: `wakeline.events` only ever holds transactional records."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings),
                                acks="all", enable_idempotence=True,
                                linger_ms=5, max_batch_size=256 * 1024,
                                transactional_id=f"wakeline-bench-{uuid.uuid4()}")
    await producer.start()
    try:
        for start in range(0, len(events), 5000):
            async with producer.transaction():
                for ev in events[start:start + 5000]:
                    await producer.send(EVENTS, encode(ev), key=record_key(ev.session_id),
                                        partition=partition_for(ev.session_id, settings.partitions))
    finally:
        await producer.stop()
