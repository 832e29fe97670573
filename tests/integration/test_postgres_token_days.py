"""Migration 0028 in the real database: `count_tenant_tokens` adds a tenant's tokens to its UTC
day and reads the total back with the tenant's quotas in one statement, as the service role,
isolated by tenant, and exact under concurrent adds from many connections (brains). The
brain's side with its cache: tests/unit/test_token_quota.py."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg
import pytest

from conftest_pg import fresh_tenant, require_postgres, service_connection, set_tenant
from wakeline.runtime.settings import CommonSettings
from wakeline.storage.pg import TenantPool
from wakeline_brain.tenant_quotas import postgres_counter

pytestmark = pytest.mark.postgres

COUNT = "SELECT * FROM count_tenant_tokens($1, $2)"


async def set_quotas(tenant: str, tokens_per_day: int, tool_calls_in_flight: int) -> None:
    """As the gateway does it: an upsert in a tenant transaction, as the service role."""
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        await conn.execute("INSERT INTO tenant_quotas (tenant, tokens_per_day, tool_calls_in_flight, set_by) "
                           "VALUES ($1, $2, $3, 'user:admin')", tenant, tokens_per_day, tool_calls_in_flight)


async def test_adds_to_the_tenants_utc_day_and_reads_back_the_total_with_its_quotas() -> None:
    await require_postgres()
    tenant, other = fresh_tenant(), fresh_tenant()
    async with service_connection() as conn:
        first = await conn.fetchrow(COUNT, tenant, 0)
        assert first["used"] == 0 and first["tokens_per_day"] is None and first["tool_calls_in_flight"] is None
        assert first["day"] == datetime.now(UTC).date()  # the database's UTC date (a race at midnight aside)
        await conn.fetchrow(COUNT, tenant, 120)
        after = await conn.fetchrow(COUNT, tenant, 30)
        assert after["used"] == 150
        assert (await conn.fetchrow(COUNT, other, 0))["used"] == 0  # tenants apart
    await set_quotas(tenant, tokens_per_day=1000, tool_calls_in_flight=3)
    async with service_connection() as conn:
        read = await conn.fetchrow(COUNT, tenant, 0)
        assert (read["used"], read["tokens_per_day"], read["tool_calls_in_flight"]) == (150, 1000, 3)
        with pytest.raises(asyncpg.RaiseError, match="negative"):
            await conn.fetchrow(COUNT, tenant, -1)
        with pytest.raises(asyncpg.RaiseError, match="tenant is required"):
            await conn.fetchrow(COUNT, "", 1)


async def test_a_tenant_sees_only_its_own_days_and_nobody_writes_them_but_through_the_count() -> None:
    await require_postgres()
    tenant, other = fresh_tenant(), fresh_tenant()
    async with service_connection() as conn:
        await conn.fetchrow(COUNT, tenant, 7)
        await conn.fetchrow(COUNT, other, 9)
        async with conn.transaction():
            await set_tenant(conn, tenant)
            rows = await conn.fetch("SELECT tenant, tokens FROM tenant_token_days")
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute("DELETE FROM tenant_token_days")
    assert [(r["tenant"], r["tokens"]) for r in rows] == [(tenant, 7)]


async def test_concurrent_adds_from_many_connections_lose_nothing() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    async with TenantPool(CommonSettings().postgres_dsn, "wakeline-test", min_size=4, max_size=8) as pool:
        count = postgres_counter(pool)
        await asyncio.gather(*(count(tenant, 10) for _ in range(200)))
        assert (await count(tenant, 0)).used == 2000
