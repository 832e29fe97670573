"""Helpers for tests against the real Postgres (deploy/postgres/pg.sh up + migrate).

A plain module, not a conftest: tests import what they need. Connections use the DSNs
from wakeline.runtime.settings; the superuser one goes over the unix socket reported by
`pg.sh status` (peer auth maps root to postgres). Isolation is by fresh session ids and
tenants per test; nothing is ever truncated (nothing could be).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from tests.requirements import missing, require
from wakeline.storage.event_rows import COLUMNS, EVENT_COLUMNS, HASH_COLUMNS
from wakeline.storage.migrate import MIGRATIONS_DIR, apply_migrations
from wakeline.storage.pg import TenantPool
from wakeline.storage.postgres_store import PostgresEventStore
from wakeline.ops.retention import RetentionSettings
from wakeline.runtime.settings import AdminSettings, CommonSettings

PG_SH = Path(__file__).resolve().parents[2] / "deploy" / "postgres" / "pg.sh"

# One row, any values: how tests plant what no writer would store.
INSERT_EVENT = (f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) VALUES ("
                + ", ".join(f"${n}::{sql_type}" for n, (_, sql_type) in enumerate(COLUMNS, 1)) + ")")
# Before 0022 the hashes were hex text: for a test that builds a database at an older migration.
INSERT_EVENT_BEFORE_0022 = INSERT_EVENT.replace("::bytea", "::text")


async def require_postgres() -> None:
    """Skip the test when Postgres is unreachable, or fail it under CI."""
    dsn = CommonSettings().postgres_dsn
    try:
        conn = await asyncpg.connect(dsn, timeout=5)
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        message = (
            f"Postgres unreachable at {_redacted(dsn)}: {type(exc).__name__}: {exc}. "
            "Start it with `bash deploy/postgres/pg.sh up && python -m wakeline.storage.migrate`."
        )
        missing(message)
    await conn.close()


def _redacted(dsn: str) -> str:
    scheme, _, rest = dsn.partition("://")
    return f"{scheme}://***@{rest.split('@', 1)[-1]}"


@asynccontextmanager
async def connected(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        yield conn
    finally:
        await conn.close()


def service_connection():
    """The role every service uses: INSERT/SELECT on the log, never its owner."""
    return connected(CommonSettings().postgres_dsn)


def owner_connection():
    """The schema owner (migrations): all privileges, but still bound by RLS and triggers."""
    return connected(AdminSettings().postgres_admin_dsn)


def maintenance_connection():
    """The retention role: drops partitions through its definer functions, reads retention_log."""
    return connected(RetentionSettings().postgres_maintenance_dsn)


async def fresh_month() -> tuple[str, datetime, datetime]:
    """A month in 1100..1999 with no events partition, never dropped: (name, start, end).

    A dropped month is never created again (0007), so every test that drops one uses up
    one month of the shared database for good; nine centuries last a while.
    """
    async with maintenance_connection() as conn:
        while True:
            start = datetime(random.randint(1100, 1999), random.randint(1, 12), 1, tzinfo=UTC)
            end = (start + timedelta(days=32)).replace(day=1)
            name = f"events_y{start.year:04d}m{start.month:02d}"
            if await conn.fetchval("SELECT to_regclass($1) IS NULL AND NOT EXISTS (SELECT 1 FROM retention_log "
                                   "WHERE range_from < $3 AND range_to > $2)", f"public.{name}", start, end):
                return name, start, end


@asynccontextmanager
async def superuser_connection() -> AsyncIterator[asyncpg.Connection]:
    """The cluster superuser over the unix socket; skips if that is not possible here (fails under CI)."""
    require(os.geteuid() == 0, "superuser checks need root (peer auth maps root to postgres)")
    status = subprocess.run(["bash", str(PG_SH), "status"], capture_output=True, text=True)
    fields = dict(line.split("=", 1) for line in status.stdout.splitlines() if "=" in line)
    if fields.get("state") != "running":
        missing(f"pg.sh status does not report a running local cluster: {status.stdout!r}{status.stderr!r}")
    conn = await asyncpg.connect(host=fields["socket_dir"], port=int(fields["port"]),
                                 user="postgres", database=CommonSettings().database, timeout=10)
    try:
        yield conn
    finally:
        await conn.close()


def fresh_tenant() -> str:
    return f"tenant-{uuid.uuid4().hex[:12]}"


def fresh_session_id() -> str:
    return str(uuid.uuid4())


def new_event(tenant: str, session_id: str, seq: int = 1, **overrides: Any) -> dict[str, Any]:
    """A valid events row; the hash values are placeholders (the chain is the writer's job)."""
    event = {
        "tenant": tenant, "session_id": session_id, "seq": seq, "event_id": uuid.uuid4(),
        "causation_id": None, "type": "user_message", "actor": "user:test",
        "trust": "instruction", "ts": datetime.now(UTC), "prev_hash": "0" * 64,
        "hash": uuid.uuid4().hex * 2, "payload": {"text": "hello"},
        "tool_name": None, "is_error": None,
    }
    event.update(overrides)
    return event


def row_values(event: dict[str, Any], *, before_0022: bool = False) -> list[Any]:
    """`event` (a `new_event` dict: hex hashes, a payload dict) as INSERT_EVENT's parameters:
    the payload as JSON text, the hashes as the bytes 0022 stores (hex text before it)."""
    def stored(column: str) -> Any:
        value = event[column]
        if column == "payload":
            return json.dumps(value)
        if column in HASH_COLUMNS and isinstance(value, str) and not before_0022:
            return bytes.fromhex(value)
        return value
    return [stored(c) for c in EVENT_COLUMNS]


async def insert_event(conn: asyncpg.Connection, event: dict[str, Any], *, before_0022: bool = False) -> None:
    """Make sure the month's partition exists, then insert the row."""
    await conn.execute("SELECT ensure_events_partition($1)", event["ts"])
    await conn.execute(INSERT_EVENT_BEFORE_0022 if before_0022 else INSERT_EVENT,
                       *row_values(event, before_0022=before_0022))


async def set_tenant(conn: asyncpg.Connection, tenant: str) -> None:
    """Transaction-local tenant, as wakeline.storage.pg.TenantPool does it (call inside a transaction)."""
    await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", tenant)


async def insert_event_as(conn: asyncpg.Connection, tenant: str, event: dict[str, Any], *,
                          before_0022: bool = False) -> None:
    """Insert `event` in its own transaction with `tenant` set."""
    async with conn.transaction():
        await set_tenant(conn, tenant)
        await insert_event(conn, event, before_0022=before_0022)


async def require_kafka(settings) -> None:
    """Creates the wakeline topics if needed; skips when the broker is unreachable, fails under CI."""
    import asyncio

    from aiokafka.errors import KafkaError

    from wakeline.transport.topic_admin import ensure_topics

    try:
        await asyncio.wait_for(ensure_topics(settings), timeout=20)
    except (KafkaError, OSError, TimeoutError) as exc:
        message = f"Kafka unreachable at {settings.kafka_bootstrap}: {type(exc).__name__}: {exc}"
        missing(message)


@asynccontextmanager
async def database_before(version: int, workdir: Path) -> AsyncIterator[str]:
    """A new database with the migrations before `version` applied (copied into `workdir`),
    dropped afterwards; its admin DSN. For a test of what `version` does to data already there."""
    name = f"wakeline_before_{version:04d}_{uuid.uuid4().hex[:8]}"
    async with superuser_connection() as conn:
        await conn.execute(f'CREATE DATABASE "{name}" OWNER wakeline_owner')
    try:
        dsn = AdminSettings().postgres_admin_dsn.rsplit("/", 1)[0] + "/" + name
        before = workdir / f"before-{version:04d}"
        before.mkdir()
        for sql in sorted(Path(str(MIGRATIONS_DIR)).glob("*.sql")):
            if int(sql.name.split("_", 1)[0]) < version:
                shutil.copy(sql, before / sql.name)
        await apply_migrations(dsn, before)
        yield dsn
    finally:
        async with superuser_connection() as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@asynccontextmanager
async def postgres_event_store() -> AsyncIterator[PostgresEventStore]:
    """The real `EventStore` on a small pool of the service role, for the contract suites."""
    await require_postgres()
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=2) as pool:
        yield PostgresEventStore(pool)
