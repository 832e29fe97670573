"""The service role is deliberately weak; migrations are repeatable and tamper-evident."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from conftest_pg import owner_connection, require_postgres, service_connection
from wakeline.storage.migrate import MIGRATIONS_DIR, MigrationError, apply_migrations
from wakeline.runtime.settings import AdminSettings

pytestmark = pytest.mark.postgres


async def test_service_role_is_not_owner_superuser_or_rls_exempt() -> None:
    await require_postgres()
    async with service_connection() as conn:
        role = await conn.fetchrow(
            "SELECT rolname, rolsuper, rolbypassrls, rolcreatedb, rolcreaterole "
            "FROM pg_roles WHERE rolname = current_user")
        owners = await conn.fetch(
            "SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename IN ('events', 'event_keys', 'sessions', 'archiver_offsets', 'dead_letters')")
        events_owner = await conn.fetchval(
            "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'events'::regclass")
        member_of_owner = await conn.fetchval("SELECT pg_has_role('wakeline_owner', 'MEMBER')")
    assert dict(role) == {"rolname": "wakeline_service", "rolsuper": False, "rolbypassrls": False,
                          "rolcreatedb": False, "rolcreaterole": False}
    assert len(owners) == 5 and all(r["tableowner"] == "wakeline_owner" for r in owners)
    assert events_owner == "wakeline_owner"
    assert member_of_owner is False


async def test_service_role_holds_exactly_the_granted_privileges() -> None:
    await require_postgres()
    async with service_connection() as conn:
        rows = await conn.fetch("""
            SELECT t.name, p.privilege
            FROM unnest(ARRAY['events', 'event_keys', 'session_keys', 'sessions', 'archiver_offsets',
                              'dead_letters', 'schema_migrations', 'events_y2026m01']) AS t(name)
            CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE',
                                    'REFERENCES', 'TRIGGER']) AS p(privilege)
            WHERE has_table_privilege(current_user, t.name, p.privilege)""")
        can_create = await conn.fetchval("SELECT has_schema_privilege('public', 'CREATE')")
        can_ensure = await conn.fetchval(
            "SELECT has_function_privilege('ensure_events_partition(timestamptz)', 'EXECUTE')")
    held = {(r["name"], r["privilege"]) for r in rows}
    assert held == {
        ("events", "SELECT"), ("events", "INSERT"), ("event_keys", "SELECT"), ("session_keys", "SELECT"),
        ("sessions", "SELECT"), ("sessions", "INSERT"), ("sessions", "UPDATE"),
        ("archiver_offsets", "SELECT"), ("archiver_offsets", "INSERT"), ("archiver_offsets", "UPDATE"),
        ("dead_letters", "SELECT"), ("dead_letters", "INSERT"),
    }
    assert (can_create, can_ensure) == (False, True)


async def test_rls_is_enabled_and_forced_on_tenant_tables() -> None:
    await require_postgres()
    async with owner_connection() as conn:
        rows = await conn.fetch(
            "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class "
            "WHERE oid IN ('events'::regclass, 'event_keys'::regclass, 'session_keys'::regclass, "
            "'sessions'::regclass)")
    assert all(r["relrowsecurity"] and r["relforcerowsecurity"] for r in rows) and len(rows) == 4


async def test_migrate_twice_applies_nothing_the_second_time() -> None:
    await require_postgres()
    dsn = AdminSettings().postgres_admin_dsn
    await apply_migrations(dsn)  # whatever was pending (normally nothing: pg.sh + migrate ran)
    assert await apply_migrations(dsn) == []


async def test_concurrent_migrates_do_not_collide() -> None:
    await require_postgres()
    dsn = AdminSettings().postgres_admin_dsn
    results = await asyncio.gather(apply_migrations(dsn), apply_migrations(dsn))
    assert results == [[], []]


async def test_migrate_refuses_when_an_applied_file_changed(tmp_path: Path) -> None:
    await require_postgres()
    shutil.copytree(MIGRATIONS_DIR, tmp_path, dirs_exist_ok=True)
    first = sorted(tmp_path.glob("*.sql"))[0]
    first.write_text(first.read_text() + "\n-- edited after the fact\n")
    with pytest.raises(MigrationError, match="changed after it was applied"):
        await apply_migrations(AdminSettings().postgres_admin_dsn, tmp_path)
