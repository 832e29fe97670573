"""Migration 0030 in the real database: the operator's ceiling on a tenant's quotas. Only the
owner writes it (`wakeline quotas ceiling`), its history refuses change, and every place a limit
is read (admit_quotas, take_turn_slot, count_tenant_tokens) applies the lower of the tenant's own
value and its ceiling, the default being the ceiling where the operator set none. The HTTP side:
test_gateway_quotas.py."""

from __future__ import annotations

import json
import uuid

import asyncpg
import pytest

from conftest_pg import fresh_tenant, owner_connection, require_postgres, service_connection, set_tenant
from wakeline.ops.quota_ceilings import set_ceilings
from wakeline.runtime.settings import CommonSettings
from wakeline.storage.pg import TenantPool
from wakeline.storage.turn_slots import PostgresTurnSlots
from wakeline_brain.tenant_quotas import postgres_counter

pytestmark = pytest.mark.postgres
ADMIT = "SELECT * FROM admit_quotas($1, $2, $3, $4)"


async def set_quotas(tenant: str, by: str, **values: int | None) -> None:
    """As the gateway does it: an upsert in a tenant transaction, as the service role."""
    columns = ", ".join(values)
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        await conn.execute(
            f"INSERT INTO tenant_quotas (tenant, {columns}, set_by) VALUES ($1, "
            + ", ".join(f"${n}" for n in range(2, len(values) + 2)) + f", ${len(values) + 2}) "
            "ON CONFLICT (tenant) DO UPDATE SET " + ", ".join(f"{c} = EXCLUDED.{c}" for c in values)
            + ", set_by = EXCLUDED.set_by", tenant, *values.values(), by)


async def set_ceiling(tenant: str, by: str = "operator:ops", **values: int | None) -> dict:
    """As `wakeline quotas ceiling` does it: as the schema owner."""
    async with owner_connection() as conn:
        return await set_ceilings(conn, tenant, values, by)


async def test_the_operator_sets_only_the_ceilings_named_and_every_change_is_kept_for_good() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    first = await set_ceiling(tenant, running_sessions=50, tokens_per_day=10**6)
    second = await set_ceiling(tenant, "operator:eve", running_sessions=None, commands_per_second=7)
    assert first["ceilings"]["running_sessions"] == 50 and second["set_by"] == "operator:eve"
    assert second["ceilings"] == {"running_sessions": None, "sessions_per_minute": None, "commands_per_second": 7,
                                  "tool_calls_in_flight": None, "tokens_per_day": 10**6}
    async with owner_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        log = await conn.fetch("SELECT old, new, set_by FROM tenant_quota_ceiling_changes ORDER BY id")
        for statement in ("UPDATE tenant_quota_ceiling_changes SET set_by = 'x'",
                          "DELETE FROM tenant_quota_ceiling_changes", "TRUNCATE tenant_quota_ceiling_changes",
                          "DELETE FROM tenant_quota_ceilings", "TRUNCATE tenant_quota_ceilings"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                async with conn.transaction():
                    await conn.execute(statement)
    assert [r["set_by"] for r in log] == ["operator:ops", "operator:eve"] and log[0]["old"] is None
    assert (json.loads(log[1]["old"])["running_sessions"], json.loads(log[1]["new"])["running_sessions"]) == (50, None)


async def test_the_service_role_may_read_the_ceilings_never_write_them() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    await set_ceiling(tenant, running_sessions=5)
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        assert await conn.fetchval("SELECT running_sessions FROM tenant_quota_ceilings") == 5
        for statement in ("INSERT INTO tenant_quota_ceilings (tenant, running_sessions, set_by) "
                          "VALUES ($1, 500, 'user:adam')",
                          "UPDATE tenant_quota_ceilings SET running_sessions = 500 WHERE tenant = $1",
                          "INSERT INTO tenant_quota_ceiling_changes (tenant, new, set_by) VALUES ($1, '{}', 'x')"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                async with conn.transaction():
                    await conn.execute(statement, tenant)
    async with service_connection() as conn:
        held = await conn.fetch("""
            SELECT t.name, p.privilege FROM unnest(ARRAY['tenant_quota_ceilings',
                                                         'tenant_quota_ceiling_changes']) AS t(name)
            CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES',
                                    'TRIGGER']) AS p(privilege)
            WHERE has_table_privilege(current_user, t.name, p.privilege)""")
    assert {(r["name"], r["privilege"]) for r in held} == {
        ("tenant_quota_ceilings", "SELECT"), ("tenant_quota_ceiling_changes", "SELECT")}


async def test_what_applies_is_the_lower_of_own_and_ceiling_and_the_default_is_the_ceiling_where_none_is_set() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    await set_quotas(tenant, "user:adam", running_sessions=500, sessions_per_minute=3, commands_per_second=900)
    await set_ceiling(tenant, running_sessions=50, tool_calls_in_flight=400)
    names = ["running_sessions", "sessions_per_minute", "commands_per_second", "tool_calls_in_flight",
             "tokens_per_day"]
    async with service_connection() as conn:
        limits = await conn.fetchval("SELECT tenant_quota_limits($1, $2, $3)", tenant, names,
                                     [100, 600, 200, 200, None])
    assert limits == [50, 3, 200, 400, None]


async def test_admission_honours_the_ceiling_over_a_higher_value_of_the_tenants_own() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    await set_quotas(tenant, "user:adam", sessions_per_minute=100)
    await set_ceiling(tenant, sessions_per_minute=2)
    async with service_connection() as conn:
        answers = [await conn.fetchrow(ADMIT, tenant, ["sessions_per_minute"], [60], [600]) for _ in range(3)]
    assert answers[:2] == [None, None]
    assert (answers[2]["refused"], answers[2]["refused_limit"]) == ("sessions_per_minute", 2)


async def test_admission_caps_an_own_value_above_the_default_when_the_operator_set_no_ceiling() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    await set_quotas(tenant, "user:adam", sessions_per_minute=100)
    async with service_connection() as conn:
        answers = [await conn.fetchrow(ADMIT, tenant, ["sessions_per_minute"], [60], [1]) for _ in range(2)]
    assert answers[0] is None and answers[1]["refused_limit"] == 1


async def test_turn_slots_honour_the_ceiling_over_a_higher_value_of_the_tenants_own() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    await set_quotas(tenant, "user:adam", running_sessions=10)
    await set_ceiling(tenant, running_sessions=1)
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=2) as pool:
        slots = PostgresTurnSlots(pool, default_limit=100)
        first, second = (f"s-{uuid.uuid4().hex[:8]}" for _ in range(2))
        assert (await slots.take(tenant, first)).granted is True
        refused = await slots.take(tenant, second)
        assert (refused.granted, refused.limit) == (False, 1)
        await set_ceiling(tenant, running_sessions=None)  # back to the default: the tenant's own 10 applies
        answer = await slots.take(tenant, second)
        assert (answer.granted, answer.limit) == (True, 10)
        await slots.release(tenant, first)
        await slots.release(tenant, second)


async def test_the_token_count_returns_the_limits_under_the_ceiling() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    await set_quotas(tenant, "user:adam", tokens_per_day=10**9, tool_calls_in_flight=300)
    await set_ceiling(tenant, tokens_per_day=1000)
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=1) as pool:
        told = await postgres_counter(pool, None, 200)(tenant, 7)
        untold = await postgres_counter(pool)(tenant, 0)  # a brain of before 0030: own under the ceiling
    assert (told.used, told.tokens_per_day, told.tool_calls_in_flight) == (7, 1000, 200)
    assert (untold.used, untold.tokens_per_day, untold.tool_calls_in_flight) == (7, 1000, 300)
