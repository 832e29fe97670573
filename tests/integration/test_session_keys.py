"""session_keys (0020): one row per (tenant, session) that has events, against the real Postgres.

Filled by the statement trigger that fills event_keys, whoever inserts and through whichever
table; append-only; hidden from other tenants; and on an existing database 0020 registers
every session already archived, so the signer's walk loses none when the index it replaced
is dropped.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from conftest_pg import (
    connected, database_before, fresh_session_id, fresh_tenant, insert_event, insert_event_as, new_event,
    owner_connection, require_postgres, service_connection, set_tenant,
)
from wakeline.storage.migrate import apply_migrations

pytestmark = pytest.mark.postgres

SESSION_KEYS = "SELECT session_id FROM session_keys"


async def _sessions_seen(conn: asyncpg.Connection, tenant: str) -> set[str]:
    async with conn.transaction():
        await set_tenant(conn, tenant)
        return {r["session_id"] for r in await conn.fetch(SESSION_KEYS)}


async def test_every_insert_registers_its_sessions_once_and_only_for_their_tenant() -> None:
    await require_postgres()
    ours, theirs = fresh_tenant(), fresh_tenant()
    first, late, other = fresh_session_id(), fresh_session_id(), fresh_session_id()
    ts = datetime.now(UTC) - timedelta(days=1)
    async with service_connection() as conn:
        async with conn.transaction():  # two sessions in one statement's worth of rows
            await set_tenant(conn, ours)
            for seq in (1, 2, 3):
                await insert_event(conn, new_event(ours, first, seq, ts=ts))
        await insert_event_as(conn, ours, new_event(ours, first, 4, ts=ts))  # a later statement
        await insert_event_as(conn, ours, new_event(ours, late, 7, ts=ts))  # no seq 1, like a fork
        await insert_event_as(conn, theirs, new_event(theirs, other, 1, ts=ts))
        assert await _sessions_seen(conn, ours) == {first, late}
        assert await _sessions_seen(conn, theirs) == {other}
        async with conn.transaction():  # no tenant set: nothing
            assert await conn.fetch(SESSION_KEYS) == []
        async with conn.transaction():
            await set_tenant(conn, ours)
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute("INSERT INTO session_keys (tenant, session_id) VALUES ($1, 'planted')", ours)
    async with owner_connection() as conn, conn.transaction():
        await set_tenant(conn, ours)
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await conn.execute("DELETE FROM session_keys WHERE session_id = $1", first)
    async with owner_connection() as conn:
        async with conn.transaction():
            await set_tenant(conn, ours)
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                await conn.execute("UPDATE session_keys SET session_id = 'moved' WHERE session_id = $1", first)


async def test_the_migration_registers_the_sessions_already_archived(tmp_path: Path) -> None:
    """0001..0019 on a new database, events of two tenants, then 0020: every session is there."""
    await require_postgres()
    async with database_before(20, tmp_path) as dsn:
        ts = datetime.now(UTC) - timedelta(days=1)
        expected: dict[str, set[str]] = {fresh_tenant(): set(), fresh_tenant(): set()}
        async with connected(dsn) as conn:
            for n, (tenant, sessions) in enumerate([*expected.items()] * 3):
                session = f"pre-{n}-{fresh_session_id()[:8]}"
                sessions.add(session)
                for seq in range(1 + n, 4 + n):  # sessions 1.. start past seq 1
                    await insert_event_as(conn, tenant, new_event(tenant, session, seq, ts=ts), before_0022=True)
        applied = await apply_migrations(dsn)  # 0020 and whatever came after it
        assert applied[0] == "0020_session_keys" and all(int(m[:4]) > 20 for m in applied[1:])
        async with connected(dsn) as conn:
            for tenant, sessions in expected.items():
                assert await _sessions_seen(conn, tenant) == sessions
            assert sorted(r[0] for r in await conn.fetch("SELECT event_tenants()")) == sorted(expected)
            assert await conn.fetchval("SELECT to_regclass('event_keys_tenant_session_seq')") is None
