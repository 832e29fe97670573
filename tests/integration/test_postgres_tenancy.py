"""Row-level security keeps tenants apart; the tenant is scoped to one transaction."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import pytest

from conftest_pg import (
    fresh_session_id, fresh_tenant, insert_event, insert_event_as, new_event,
    require_postgres, service_connection, set_tenant,
)
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings

pytestmark = pytest.mark.postgres

SESSION_COLUMNS = "tenant, session_id, owner, status, last_seq, last_hash, created_at, updated_at"


async def test_tenant_sees_none_of_another_tenants_rows() -> None:
    await require_postgres()
    tenant_a, tenant_b, session_id = fresh_tenant(), fresh_tenant(), fresh_session_id()
    now = datetime.now(UTC)
    async with service_connection() as conn:
        await insert_event_as(conn, tenant_a, new_event(tenant_a, session_id))
        async with conn.transaction():
            await set_tenant(conn, tenant_a)
            await conn.execute(f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES "
                               "($1, $2, 'user:a', 'idle', 1, 'h', $3, $3)", tenant_a, session_id, now)
        counts = {}
        for tenant in (tenant_a, tenant_b):
            async with conn.transaction():
                await set_tenant(conn, tenant)
                counts[tenant] = [
                    await conn.fetchval(f"SELECT count(*) FROM {table} WHERE session_id = $1", session_id)
                    for table in ("events", "event_keys", "session_keys", "sessions")
                ]
    assert counts == {tenant_a: [1, 1, 1, 1], tenant_b: [0, 0, 0, 0]}


async def test_insert_for_another_tenant_is_refused() -> None:
    await require_postgres()
    tenant_a, tenant_b = fresh_tenant(), fresh_tenant()
    async with service_connection() as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            await insert_event_as(conn, tenant_b, new_event(tenant_a, fresh_session_id()))


async def test_without_a_tenant_nothing_is_visible_or_insertable() -> None:
    await require_postgres()
    tenant, session_id = fresh_tenant(), fresh_session_id()
    async with service_connection() as conn:
        await insert_event_as(conn, tenant, new_event(tenant, session_id))
        seen = await conn.fetchval("SELECT count(*) FROM events WHERE session_id = $1", session_id)
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            await insert_event(conn, new_event(tenant, fresh_session_id()))
    assert seen == 0


async def test_tenant_pool_scopes_tenant_to_the_transaction() -> None:
    await require_postgres()
    tenant, session_id = fresh_tenant(), fresh_session_id()
    # One connection, so the second borrower gets the very connection the first used.
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=1) as pool:
        async with pool.transaction(tenant) as conn:
            await insert_event(conn, new_event(tenant, session_id))
        async with pool.system_transaction() as conn:
            leaked = await conn.fetchval("SELECT current_setting('wakeline.tenant', true)")
            seen = await conn.fetchval("SELECT count(*) FROM events WHERE session_id = $1", session_id)
        async with pool.transaction(tenant) as conn:
            own = await conn.fetchval("SELECT count(*) FROM events WHERE session_id = $1", session_id)
    assert (leaked or "", seen, own) == ("", 0, 1)


async def test_a_system_statement_runs_alone_with_no_tenant_on_a_connection_a_tenant_used() -> None:
    """`system_statement` runs outside any transaction; the tenant and viewer of the
    connection's previous transaction are gone, and no tenant's rows are visible."""
    await require_postgres()
    tenant, session_id = fresh_tenant(), fresh_session_id()
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=1) as pool:
        async with pool.transaction(tenant, viewer="user:someone") as conn:
            await conn.fetchval("SELECT 1")
        async with pool.transaction(tenant) as conn:
            await insert_event(conn, new_event(tenant, session_id))

        async def alone(conn: asyncpg.Connection) -> tuple:
            row = await conn.fetchrow(
                "SELECT current_setting('wakeline.tenant', true) AS tenant, "
                "current_setting('wakeline.viewer', true) AS viewer, "
                "(SELECT count(*) FROM events WHERE session_id = $1) AS seen", session_id)
            return (*row, conn.is_in_transaction())

        tenant_seen, viewer_seen, seen, in_transaction = await pool.system_statement(alone)
    assert (tenant_seen or "", viewer_seen or "", seen, in_transaction) == ("", "", 0, False)


async def test_tenant_pool_rolls_back_when_the_block_raises() -> None:
    await require_postgres()
    tenant, session_id = fresh_tenant(), fresh_session_id()
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=1) as pool:
        with pytest.raises(RuntimeError):
            async with pool.transaction(tenant) as conn:
                await insert_event(conn, new_event(tenant, session_id))
                raise RuntimeError("boom")
        async with pool.transaction(tenant) as conn:
            count = await conn.fetchval("SELECT count(*) FROM events WHERE session_id = $1", session_id)
    assert count == 0


async def test_system_transaction_writes_offsets_and_dead_letters() -> None:
    await require_postgres()
    group = f"test-{fresh_session_id()}"
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=1) as pool:
        async with pool.system_transaction() as conn:
            await conn.execute(
                "INSERT INTO archiver_offsets (consumer_group, topic, partition, next_offset) "
                "VALUES ($1, 'wakeline.events', 0, 7)", group)
            await conn.execute(
                "UPDATE archiver_offsets SET next_offset = 8, updated_at = now() "
                "WHERE consumer_group = $1", group)
            await conn.execute(
                "INSERT INTO dead_letters (topic, partition, \"offset\", key, value, reason) "
                "VALUES ($1, 0, 1, 'k', 'v', 'malformed') ON CONFLICT DO NOTHING", group)
            offset = await conn.fetchval(
                "SELECT next_offset FROM archiver_offsets WHERE consumer_group = $1", group)
    assert offset == 8
