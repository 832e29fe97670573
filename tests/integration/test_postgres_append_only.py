"""The event log is append-only in the database itself, whoever connects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from conftest_pg import (
    INSERT_EVENT, fresh_session_id, fresh_tenant, insert_event_as, new_event, owner_connection,
    require_postgres, row_values, service_connection, set_tenant, superuser_connection,
)
from wakeline.storage.event_statements import INSERT_ROWS

pytestmark = pytest.mark.postgres

REFUSED = "append-only"


async def _one_event() -> tuple[str, str]:
    """Insert one event as the service; returns (tenant, session_id)."""
    await require_postgres()
    tenant, session_id = fresh_tenant(), fresh_session_id()
    async with service_connection() as conn:
        await insert_event_as(conn, tenant, new_event(tenant, session_id))
    return tenant, session_id


@pytest.mark.parametrize("statement", [
    "UPDATE events SET type = 'tampered' WHERE session_id = $1",
    "DELETE FROM events WHERE session_id = $1",
])
async def test_service_cannot_update_or_delete_events(statement: str) -> None:
    tenant, session_id = await _one_event()
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(statement, session_id)


@pytest.mark.parametrize("statement", [
    "TRUNCATE events",
    "TRUNCATE event_keys",
    "DROP TABLE events",
    "ALTER TABLE events DISABLE TRIGGER events_refuse_change",
    "ALTER TABLE events DISABLE TRIGGER ALL",
    "ALTER TABLE events NO FORCE ROW LEVEL SECURITY",
    "UPDATE event_keys SET hash = 'x'",
    "DELETE FROM event_keys",
])
async def test_service_cannot_truncate_drop_or_alter_the_log(statement: str) -> None:
    await require_postgres()
    async with service_connection() as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(statement)


async def test_service_cannot_switch_to_replica_role_to_skip_triggers() -> None:
    await require_postgres()
    async with service_connection() as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("SET session_replication_role = replica")


async def test_service_cannot_touch_a_partition_directly() -> None:
    await require_postgres()
    async with service_connection() as conn:
        partition = await conn.fetchval("SELECT ensure_events_partition(now())")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f"DELETE FROM {partition}")


@pytest.mark.parametrize("statement", [
    "UPDATE events SET type = 'tampered' WHERE session_id = $1",
    "DELETE FROM events WHERE session_id = $1",
    "UPDATE event_keys SET hash = 'x' WHERE session_id = $1",
    "DELETE FROM event_keys WHERE session_id = $1",
    "DELETE FROM session_keys WHERE session_id = $1",
])
async def test_owner_update_and_delete_are_refused_by_triggers(statement: str) -> None:
    tenant, session_id = await _one_event()
    async with owner_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match=REFUSED):
            await conn.execute(statement, session_id)


async def test_owner_truncate_is_refused_on_parent_partition_and_keys() -> None:
    await require_postgres()
    async with owner_connection() as conn:
        partition = await conn.fetchval("SELECT ensure_events_partition(now())")
        for table in ("events", partition, "event_keys", "session_keys"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match=REFUSED):
                await conn.execute(f"TRUNCATE {table}")


@pytest.mark.parametrize("statement", [
    "UPDATE events SET type = 'tampered' WHERE session_id = $1",
    "DELETE FROM events WHERE session_id = $1",
    "UPDATE {partition} SET type = 'tampered' WHERE session_id = $1",
    "DELETE FROM {partition} WHERE session_id = $1",
    "DELETE FROM event_keys WHERE session_id = $1",
    "DELETE FROM session_keys WHERE session_id = $1",
])
async def test_replica_role_does_not_bypass_triggers_even_for_superuser(statement: str) -> None:
    _, session_id = await _one_event()
    async with superuser_connection() as conn, conn.transaction():
        partition = await conn.fetchval("SELECT ensure_events_partition(now())")
        await conn.execute("SET LOCAL session_replication_role = replica")
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match=REFUSED):
            await conn.execute(statement.format(partition=partition), session_id)


async def test_replica_role_does_not_bypass_truncate_triggers_for_superuser() -> None:
    await require_postgres()
    async with superuser_connection() as conn:
        partition = await conn.fetchval("SELECT ensure_events_partition(now())")
        for table in ("events", partition, "event_keys", "session_keys"):
            async with conn.transaction():
                await conn.execute("SET LOCAL session_replication_role = replica")
                with pytest.raises(asyncpg.InsufficientPrivilegeError, match=REFUSED):
                    await conn.execute(f"TRUNCATE {table}")


async def test_every_partition_carries_always_enabled_guards() -> None:
    await require_postgres()
    async with owner_connection() as conn:
        # A month outside the migration's window: created on demand, same guards.
        await conn.execute("SELECT ensure_events_partition('2099-06-15T12:00:00Z')")
        rows = await conn.fetch("""
            SELECT c.relname,
                   array_agg(t.tgname ORDER BY t.tgname) FILTER (WHERE t.tgenabled = 'A') AS always,
                   count(*) FILTER (WHERE t.tgenabled <> 'A') AS not_always,
                   bool_or(t.tgtype & 32 <> 0) AS has_truncate,
                   c.relrowsecurity AND c.relforcerowsecurity AS rls
            FROM pg_inherits i
            JOIN pg_class c ON c.oid = i.inhrelid
            LEFT JOIN pg_trigger t ON t.tgrelid = c.oid AND NOT t.tgisinternal
            WHERE i.inhparent = 'events'::regclass
            GROUP BY c.relname, c.relrowsecurity, c.relforcerowsecurity""")
    names = {r["relname"] for r in rows}
    assert {"events_y2025m01", "events_y2027m12", "events_y2099m06"} <= names
    for row in rows:
        assert row["not_always"] == 0, row
        assert row["has_truncate"], row
        assert {"events_record_keys", "events_refuse_change"} <= set(row["always"]), row
        assert row["rls"], row


async def test_events_and_every_partition_register_keys_per_statement_always() -> None:
    await require_postgres()
    async with owner_connection() as conn:
        await conn.execute("SELECT ensure_events_partition('2099-07-15T12:00:00Z')")
        rows = await conn.fetch("""
            SELECT c.relname, t.tgenabled::text AS enabled, t.tgtype & 1 = 0 AS per_statement,
                   t.tgnewtable IS NOT NULL AS transition_table
            FROM pg_class c LEFT JOIN pg_trigger t ON t.tgrelid = c.oid AND t.tgname = 'events_record_keys'
            WHERE c.oid = 'events'::regclass
               OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'events'::regclass)""")
    assert {"events", "events_y2099m07"} <= {r["relname"] for r in rows}
    for row in rows:
        assert (row["enabled"], row["per_statement"], row["transition_table"]) == ("A", True, True), row


async def test_a_many_row_insert_registers_every_key() -> None:
    await require_postgres()
    tenant, session_id = fresh_tenant(), fresh_session_id()
    events = [new_event(tenant, session_id, seq=seq) for seq in (1, 2, 3)]
    async with service_connection() as conn:
        async with conn.transaction():
            await set_tenant(conn, tenant)
            await conn.execute(INSERT_ROWS, *(list(column) for column in zip(*(row_values(e) for e in events))))
        async with conn.transaction():
            await set_tenant(conn, tenant)
            keys = await conn.fetch("SELECT seq, event_id, encode(hash, 'hex') FROM event_keys "
                                    "WHERE session_id = $1 ORDER BY seq", session_id)
    assert [tuple(k) for k in keys] == [(e["seq"], e["event_id"], e["hash"]) for e in events]


async def test_an_insert_into_a_partition_by_name_registers_its_key() -> None:
    await require_postgres()
    tenant, session_id = fresh_tenant(), fresh_session_id()
    event = new_event(tenant, session_id)
    async with owner_connection() as conn:
        partition = await conn.fetchval("SELECT ensure_events_partition($1)", event["ts"])
        async with conn.transaction():
            await set_tenant(conn, tenant)
            await conn.execute(INSERT_EVENT.replace("INSERT INTO events ", f"INSERT INTO {partition} "),
                               *row_values(event))
            key = await conn.fetchval("SELECT event_id FROM event_keys WHERE session_id = $1 AND seq = 1", session_id)
    assert key == event["event_id"]


async def test_event_with_existing_session_and_seq_but_other_ts_is_refused() -> None:
    tenant, session_id = await _one_event()
    later = datetime.now(UTC) + timedelta(days=40)  # likely another partition, too
    duplicate = new_event(tenant, session_id, seq=1, ts=later)
    async with service_connection() as conn:
        with pytest.raises(asyncpg.UniqueViolationError):
            await insert_event_as(conn, tenant, duplicate)
        async with conn.transaction():
            await set_tenant(conn, tenant)
            count = await conn.fetchval("SELECT count(*) FROM events WHERE session_id = $1", session_id)
            stored = await conn.fetchval(
                "SELECT count(*) FROM events WHERE event_id = $1", duplicate["event_id"])
    assert (count, stored) == (1, 0)


async def test_event_id_is_unique_across_sessions() -> None:
    tenant = fresh_tenant()
    await require_postgres()
    first = new_event(tenant, fresh_session_id())
    second = new_event(tenant, fresh_session_id(), event_id=first["event_id"])
    async with service_connection() as conn:
        await insert_event_as(conn, tenant, first)
        with pytest.raises(asyncpg.UniqueViolationError):
            await insert_event_as(conn, tenant, second)


async def test_exact_redelivery_is_a_no_op_with_on_conflict_do_nothing() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    event = new_event(tenant, fresh_session_id())
    async with service_connection() as conn:
        await insert_event_as(conn, tenant, event)
        async with conn.transaction():
            await set_tenant(conn, tenant)
            status = await conn.execute(
                "INSERT INTO events SELECT * FROM events WHERE event_id = $1 "
                "ON CONFLICT DO NOTHING", event["event_id"])
    assert status == "INSERT 0 0"
