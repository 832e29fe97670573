"""0011's table guards: a table given `wakeline_append_only` and `wakeline_tenant_scoped` is
refused and isolated exactly as the tables 0001..0010 guarded one by one.

Each test creates its own scratch table (fresh name) as the owner and drops it at the end.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from conftest_pg import (
    fresh_tenant, owner_connection, require_postgres, service_connection, set_tenant, superuser_connection,
)

pytestmark = pytest.mark.postgres

REFUSED = "append-only"  # refuse_change()'s words, as tests/integration/test_postgres_append_only.py expects


@pytest.fixture
async def scratch() -> AsyncIterator[str]:
    """A fresh tenant table with both guards, which the service may even UPDATE, DELETE and
    TRUNCATE by privilege: whatever refuses them then is the guard."""
    await require_postgres()
    name = f"scratch_{uuid.uuid4().hex[:12]}"
    async with owner_connection() as conn:
        await conn.execute(f"CREATE TABLE {name} (tenant text NOT NULL, id int NOT NULL, note text)")
        await conn.execute("SELECT wakeline_append_only($1), wakeline_tenant_scoped($1)", name)
        await conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON {name} TO wakeline_service")
    try:
        yield name
    finally:
        async with owner_connection() as conn:
            await conn.execute(f"DROP TABLE {name}")


async def insert_as(conn: asyncpg.Connection, table: str, tenant: str, row_tenant: str | None = None) -> None:
    async with conn.transaction():
        await set_tenant(conn, tenant)
        await conn.execute(f"INSERT INTO {table} VALUES ($1, 1, 'kept')", row_tenant or tenant)


@pytest.mark.parametrize("connect", [owner_connection, service_connection], ids=["owner", "service"])
@pytest.mark.parametrize("statement", ["UPDATE {t} SET note = 'changed'", "DELETE FROM {t}", "TRUNCATE {t}"])
async def test_update_delete_and_truncate_are_refused_whoever_holds_the_privilege(scratch, connect,
                                                                                   statement) -> None:
    tenant = fresh_tenant()
    async with service_connection() as conn:
        await insert_as(conn, scratch, tenant)
    async with connect() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match=REFUSED):
            await conn.execute(statement.format(t=scratch))


async def test_replica_role_does_not_bypass_the_guard_even_for_superuser(scratch) -> None:
    tenant = fresh_tenant()
    async with service_connection() as conn:
        await insert_as(conn, scratch, tenant)
    async with superuser_connection() as conn:
        for statement in (f"UPDATE {scratch} SET note = 'changed'", f"DELETE FROM {scratch}", f"TRUNCATE {scratch}"):
            async with conn.transaction():
                await conn.execute("SET LOCAL session_replication_role = replica")
                with pytest.raises(asyncpg.InsufficientPrivilegeError, match=REFUSED):
                    await conn.execute(statement)


async def test_the_guards_are_the_triggers_and_policy_the_earlier_migrations_wrote(scratch) -> None:
    async with owner_connection() as conn:
        triggers = {table: await conn.fetch(
            "SELECT replace(tgname, $2, '') AS suffix, tgtype, tgenabled::text, tgfoid::regproc::text AS fn "
            "FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal ORDER BY 1", table, table)
            for table in (scratch, "checkpoints")}
        policies = {table: await conn.fetch(
            "SELECT policyname, permissive, roles::text[], cmd, qual, with_check FROM pg_policies "
            "WHERE tablename = $1 ORDER BY policyname", table) for table in (scratch, "checkpoints")}
        rls = await conn.fetchrow("SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = $1::regclass",
                                  scratch)
    assert [tuple(r) for r in triggers[scratch]] == [tuple(r) for r in triggers["checkpoints"]]
    assert [r["suffix"] for r in triggers[scratch]] == ["_refuse_change", "_refuse_truncate"]
    assert {r["tgenabled"] for r in triggers[scratch]} == {"A"}
    assert [tuple(r) for r in policies[scratch]] == [tuple(r) for r in policies["checkpoints"]]
    assert tuple(rls) == (True, True)


async def test_a_tenant_sees_and_writes_only_its_own_rows(scratch) -> None:
    tenant_a, tenant_b = fresh_tenant(), fresh_tenant()
    async with service_connection() as conn:
        await insert_as(conn, scratch, tenant_a)
        await insert_as(conn, scratch, tenant_b)
        await insert_as(conn, scratch, tenant_b)
        seen = {}
        for tenant in (tenant_a, tenant_b):
            async with conn.transaction():
                await set_tenant(conn, tenant)
                seen[tenant] = [r["tenant"] for r in await conn.fetch(f"SELECT tenant FROM {scratch}")]
        unset = await conn.fetchval(f"SELECT count(*) FROM {scratch}")
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            await insert_as(conn, scratch, tenant_a, row_tenant=tenant_b)
    assert seen == {tenant_a: [tenant_a], tenant_b: [tenant_b, tenant_b]}
    assert unset == 0


async def test_forced_security_binds_the_owner_too(scratch) -> None:
    tenant_a, tenant_b = fresh_tenant(), fresh_tenant()
    async with service_connection() as conn:
        await insert_as(conn, scratch, tenant_a)
    async with owner_connection() as conn:
        async with conn.transaction():
            await set_tenant(conn, tenant_b)
            foreign = await conn.fetchval(f"SELECT count(*) FROM {scratch}")
        unset = await conn.fetchval(f"SELECT count(*) FROM {scratch}")
    assert (foreign, unset) == (0, 0)


async def test_the_service_cannot_install_or_strip_guards(scratch) -> None:
    async with service_connection() as conn:
        for call in ("wakeline_append_only", "wakeline_tenant_scoped"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(f"SELECT {call}($1)", scratch)
