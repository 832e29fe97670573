"""Migration 0026 in the real database: the quota row and its change log are guarded by
Postgres itself, and `admit_quotas` counts per tenant, gives back what a refused command took,
and prunes old windows. The HTTP side: test_gateway_quotas.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from conftest_pg import fresh_tenant, owner_connection, require_postgres, service_connection, set_tenant

pytestmark = pytest.mark.postgres

ADMIT = "SELECT * FROM admit_quotas($1, $2, $3, $4)"
PER_MINUTE_THEN_SECOND = (["sessions_per_minute", "commands_per_second"], [60, 1])


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


async def counts(tenant: str) -> dict[str, int]:
    async with owner_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        rows = await conn.fetch("SELECT quota, sum(n) AS n FROM quota_counters GROUP BY quota")
    return {r["quota"]: r["n"] for r in rows}


async def test_every_change_is_kept_old_and_new_and_the_log_refuses_change_from_anyone() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    await set_quotas(tenant, "user:adam", commands_per_second=5)
    await set_quotas(tenant, "user:ada", commands_per_second=7, tokens_per_day=10**12)
    async with owner_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        log = await conn.fetch("SELECT old, new, set_by FROM tenant_quota_changes ORDER BY id")
        for statement in ("UPDATE tenant_quota_changes SET set_by = 'x'", "DELETE FROM tenant_quota_changes",
                          "TRUNCATE tenant_quota_changes", "DELETE FROM tenant_quotas", "TRUNCATE tenant_quotas"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                async with conn.transaction():  # a savepoint: the refusal rolls back only it
                    await conn.execute(statement)
    assert [r["set_by"] for r in log] == ["user:adam", "user:ada"] and log[0]["old"] is None
    second_old, second_new = json.loads(log[1]["old"]), json.loads(log[1]["new"])
    assert (second_old["commands_per_second"], second_new["commands_per_second"]) == (5, 7)
    assert (second_old["tokens_per_day"], second_new["tokens_per_day"]) == (None, 10**12)
    assert set(second_new) == {"running_sessions", "sessions_per_minute", "commands_per_second",
                               "tool_calls_in_flight", "tokens_per_day"}
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("INSERT INTO tenant_quota_changes (tenant, new, set_by) VALUES ($1, '{}', 'forged')",
                               tenant)


async def test_the_tables_are_tenant_scoped_and_the_service_holds_only_what_it_needs() -> None:
    await require_postgres()
    tenant, other = fresh_tenant(), fresh_tenant()
    await set_quotas(tenant, "user:adam", sessions_per_minute=3)
    async with service_connection() as conn:
        assert await conn.fetchrow(ADMIT, tenant, ["commands_per_second"], [1], [10]) is None
        async with conn.transaction():
            await set_tenant(conn, other)
            seen = [await conn.fetchval(f"SELECT count(*) FROM {t}")
                    for t in ("tenant_quotas", "tenant_quota_changes", "quota_counters")]
            with pytest.raises(asyncpg.InsufficientPrivilegeError):  # RLS WITH CHECK: not its tenant
                await conn.execute("INSERT INTO tenant_quotas (tenant, set_by) VALUES ($1, 'x')", tenant)
        held = await conn.fetch("""
            SELECT t.name, p.privilege FROM unnest(ARRAY['tenant_quotas', 'tenant_quota_changes',
                                                         'quota_counters']) AS t(name)
            CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES',
                                    'TRIGGER']) AS p(privilege)
            WHERE has_table_privilege(current_user, t.name, p.privilege)""")
    async with owner_connection() as conn:
        forced = await conn.fetch("SELECT relname FROM pg_class WHERE relrowsecurity AND relforcerowsecurity "
                                  "AND relname IN ('tenant_quotas', 'tenant_quota_changes', 'quota_counters')")
    assert seen == [0, 0, 0] and len(forced) == 3
    assert {(r["name"], r["privilege"]) for r in held} == {
        ("tenant_quotas", "SELECT"), ("tenant_quotas", "INSERT"), ("tenant_quotas", "UPDATE"),
        ("tenant_quota_changes", "SELECT"),
        ("quota_counters", "SELECT"), ("quota_counters", "INSERT"), ("quota_counters", "UPDATE"),
        ("quota_counters", "DELETE")}


async def test_admission_counts_up_to_the_tenants_own_limit_and_names_the_full_quota() -> None:
    await require_postgres()
    tenant, neighbour = fresh_tenant(), fresh_tenant()
    await set_quotas(tenant, "user:adam", sessions_per_minute=2)
    async with service_connection() as conn:
        answers = [await conn.fetchrow(ADMIT, tenant, *PER_MINUTE_THEN_SECOND, [100, 100]) for _ in range(3)]
        neighbours = [await conn.fetchrow(ADMIT, neighbour, *PER_MINUTE_THEN_SECOND, [100, 100]) for _ in range(3)]
    assert answers[:2] == [None, None] and neighbours == [None, None, None]
    refused = answers[2]
    assert (refused["refused"], refused["refused_limit"], refused["current_n"], refused["window_seconds"]) == (
        "sessions_per_minute", 2, 2, 60)
    assert 0 <= refused["window_elapsed"] < 1
    # The refusal took nothing: commands per second counted the two admitted only.
    assert await counts(tenant) == {"sessions_per_minute": 2, "commands_per_second": 2}


async def test_a_refusal_by_a_later_quota_gives_back_what_the_earlier_took() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    async with service_connection() as conn:
        # Sessions per minute unlimited (not counted) for the first; then limited, it counts the
        # second create, which commands per second (one in this second already) refuses.
        assert await conn.fetchrow(ADMIT, tenant, *PER_MINUTE_THEN_SECOND, [None, 1]) is None
        refused = await conn.fetchrow(ADMIT, tenant, *PER_MINUTE_THEN_SECOND, [10, 1])
    assert refused["refused"] == "commands_per_second"
    assert await counts(tenant) == {"sessions_per_minute": 0, "commands_per_second": 1}


async def test_the_first_command_of_a_window_prunes_the_windows_before_the_previous() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    hour_ago = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    async with service_connection() as conn:
        async with conn.transaction():
            await set_tenant(conn, tenant)
            for start in (hour_ago, hour_ago + timedelta(seconds=1)):
                await conn.execute("INSERT INTO quota_counters VALUES ($1, 'commands_per_second', $2, 9)",
                                   tenant, start)
            await conn.execute("INSERT INTO quota_counters VALUES ($1, 'sessions_per_minute', $2, 9)",
                               tenant, hour_ago)
        assert await conn.fetchrow(ADMIT, tenant, ["commands_per_second"], [1], [5]) is None
    # Only this quota's old windows go; another quota's are pruned by its own next window.
    assert await counts(tenant) == {"commands_per_second": 1, "sessions_per_minute": 9}
