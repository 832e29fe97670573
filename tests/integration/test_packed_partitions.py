"""A month created after 0024 (or empty when it ran) stores its columns packed, and is guarded like every month.

0024 makes `ensure_events_partition` create a plain table with its own column order and
attach it. What must not change: rows go in and come back through `events` exactly, a
session spanning a month from before 0024 and one after it reads back and verifies, and the
new month has every guard the others have (append-only, truncate refused, its keys
registered when written by name, row-level security). And the point of it: the same row
takes fewer bytes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from conftest_pg import (
    connected, database_before, fresh_month, fresh_session_id, fresh_tenant, insert_event_as, new_event,
    owner_connection, require_postgres, row_values, service_connection, set_tenant,
)
from tests.factories import at, draft, sealed
from wakeline.storage.event_rows import EVENT_COLUMNS, event_from_row, event_row
from wakeline.storage.event_statements import SELECT_SESSION
from wakeline.storage.migrate import apply_migrations
from wakeline.evidence.verify import verify_session

pytestmark = pytest.mark.postgres

PACKED = ["seq", "ts", "archived_at", "payload", "event_id", "prev_hash", "hash", "is_error", "tenant",
          "session_id", "type", "actor", "trust", "causation_id", "tool_name"]
PARENT_ORDER = ", ".join(["tenant", "session_id", "seq", "event_id", "causation_id", "type", "actor", "trust", "ts",
                          "prev_hash", "hash", "payload", "tool_name", "is_error", "archived_at"])
COLUMNS = ("SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped "
           "ORDER BY attnum")


async def test_a_new_month_is_packed_guarded_and_reads_back() -> None:
    await require_postgres()
    name, start, _ = await fresh_month()
    tenant, other = fresh_tenant(), fresh_tenant()
    session = fresh_session_id()
    first = new_event(tenant, session, 1, ts=start + timedelta(hours=1), type="tool_result", trust="data",
                      actor="runner:host-1", tool_name="bash", is_error=False, payload={"output": "ok"})
    second = new_event(tenant, session, 2, ts=start + timedelta(hours=2), causation_id="cmd-1")
    async with service_connection() as conn:
        await insert_event_as(conn, tenant, first)
    # By name, as the owner (the service role may not name a partition): the partition's
    # own guards must hold for whoever can reach it.
    async with owner_connection() as conn:
        async with conn.transaction():
            await set_tenant(conn, tenant)
            await conn.execute(f"INSERT INTO {name} ({', '.join(EVENT_COLUMNS)}) VALUES "
                               f"({', '.join(f'${n}' for n in range(1, len(EVENT_COLUMNS) + 1))})",
                               *row_values(second))
        for statement in (f"UPDATE {name} SET actor = 'user:x' WHERE session_id = $1",
                          f"DELETE FROM {name} WHERE session_id = $1"):
            with pytest.raises(asyncpg.PostgresError, match="append-only"):
                async with conn.transaction():
                    await set_tenant(conn, tenant)
                    await conn.execute(statement, session)
        with pytest.raises(asyncpg.PostgresError, match="append-only"):
            await conn.execute(f"TRUNCATE {name}")
        async with conn.transaction():
            await set_tenant(conn, other)
            seen_by_other = await conn.fetchval(f"SELECT count(*) FROM {name} WHERE session_id = $1", session)
        columns = [r["attname"] for r in await conn.fetch(COLUMNS, name)]
        async with conn.transaction():
            await set_tenant(conn, tenant)
            # Each row's bytes as the partition stores it (a row read through events comes in
            # events' order), and the same values in events' (0001's) order.
            sizes = await conn.fetch(f"SELECT pg_column_size(p.*) AS packed, pg_column_size(ROW({PARENT_ORDER})) "
                                     f"AS parent_order FROM {name} p WHERE session_id = $1", session)
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        rows = await conn.fetch(f"SELECT {', '.join(EVENT_COLUMNS)} FROM events WHERE session_id = $1 "
                                "ORDER BY seq", session)
        keys = await conn.fetch("SELECT seq, event_id, ts FROM event_keys WHERE session_id = $1 ORDER BY seq",
                                session)
    assert columns == PACKED
    assert [(r["seq"], r["type"], r["trust"], r["tool_name"], r["causation_id"]) for r in rows] == \
        [(1, "tool_result", "data", "bash", None), (2, "user_message", "instruction", None, "cmd-1")]
    assert [list(r.values()) for r in rows] == [row_values(first), row_values(second)]
    assert all(s["packed"] < s["parent_order"] for s in sizes), sizes
    assert [(k["seq"], k["event_id"], k["ts"]) for k in keys] == \
        [(1, first["event_id"], first["ts"]), (2, second["event_id"], second["ts"])]
    assert seen_by_other == 0


async def test_a_session_across_an_old_month_and_a_packed_one_reads_back_and_verifies(tmp_path: Path) -> None:
    await require_postgres()
    tenant = fresh_tenant()
    old_month, new_month = datetime(2031, 1, 31, 23, 59, 58, tzinfo=UTC), datetime(2031, 2, 1, tzinfo=UTC)
    empty_month = datetime(2031, 3, 1, tzinfo=UTC)  # created before 0024, never written: made again
    events = sealed([draft("session_created", "cmd-create", config={}, owner="user:ann"),
                     draft("user_message", "cmd-2", text="hi"), draft("turn_started", turn=1),
                     draft("user_message", "cmd-3", text="and then")],
                    tenant=tenant, stamps=at([old_month, old_month + timedelta(seconds=1),
                                              new_month + timedelta(seconds=1), new_month + timedelta(seconds=2)]))
    placeholders = ", ".join(f"${n}" for n in range(1, len(EVENT_COLUMNS) + 1))
    insert = f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) VALUES ({placeholders})"
    async with database_before(24, tmp_path) as dsn:
        async with connected(dsn) as conn:
            async with conn.transaction():
                await set_tenant(conn, tenant)
                await conn.execute("SELECT ensure_events_partition($1)", old_month)
                await conn.execute("SELECT ensure_events_partition($1)", empty_month)
                for event in events[:2]:
                    await conn.execute(insert, *event_row(event))
        applied = await apply_migrations(dsn)
        assert applied[0] == "0024_packed_partitions"
        async with connected(dsn) as conn:
            async with conn.transaction():
                await set_tenant(conn, tenant)
                await conn.execute("SELECT ensure_events_partition($1)", new_month)
                for event in events[2:]:
                    await conn.execute(insert, *event_row(event))
            async with conn.transaction():
                await set_tenant(conn, tenant)
                back = [event_from_row(r) for r in await conn.fetch(SELECT_SESSION, events[0].session_id)]
                report = await verify_session(conn, events[0].session_id)
                parts = [r["part"] for r in await conn.fetch(
                    "SELECT DISTINCT tableoid::regclass::text AS part FROM events ORDER BY 1")]
            old_columns = [r["attname"] for r in await conn.fetch(COLUMNS, "events_y2031m01")]
            new_columns = [r["attname"] for r in await conn.fetch(COLUMNS, "events_y2031m02")]
            empty_columns = [r["attname"] for r in await conn.fetch(COLUMNS, "events_y2031m03")]
            # 0001 made 2025-01 .. 2027-12 when the database was new; none was written.
            untouched = await conn.fetchval(
                "SELECT count(*) FROM pg_inherits i JOIN pg_attribute a ON a.attrelid = i.inhrelid AND a.attnum = 1 "
                "WHERE i.inhparent = 'public.events'::regclass AND a.attname <> 'seq'")
    assert back == events
    assert report.ok and report.events == 4, report
    assert old_columns == list(EVENT_COLUMNS) + ["archived_at"] and new_columns == PACKED
    assert empty_columns == PACKED and untouched == 1
    assert parts == ["events_y2031m01", "events_y2031m02"]
