"""Retention drops whole partitions past every tenant's window, as maintenance only, logged.

Each test writes into its own far-past month (a random month before 2000 with no partition
yet, never dropped), so dropping it touches no other test's data; `now` passed to retention
is just after that month, so no 2025+ partition is ever a candidate. A dropped month stays
dropped: neither ensure_events_partition nor an archiver replaying into it brings it back.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from conftest_pg import (
    INSERT_EVENT, fresh_month, fresh_session_id, fresh_tenant, insert_event_as, maintenance_connection,
    new_event, owner_connection, require_postgres, row_values, service_connection, set_tenant,
)
from tests.factories import at, draft, sealed
from wakeline.contract.events import Event
from wakeline.storage.pg import TenantPool
from wakeline.ops.retention import RetentionSettings, apply_retention, parse_window, plan_retention
from wakeline.storage.retention_cuts import RETAINED_OUT_SQLSTATE
from wakeline.runtime.settings import CommonSettings
from wakeline.storage.archive_rules import ConflictingEvent, RetainedOutEvent
from wakeline.storage.postgres_store import PostgresEventStore

pytestmark = pytest.mark.postgres

DROP = "SELECT * FROM drop_events_partition($1, $2, $3)"
CANDIDATES = "SELECT * FROM events_retention_candidates($1, $2)"
DAY = timedelta(days=1)


async def write_sessions(tenant: str, start: datetime, lengths: list[int]) -> dict[str, list[dict]]:
    """Sessions of the given lengths for `tenant`, all inside the month beginning at `start`."""
    sessions = {}
    async with service_connection() as conn:
        for length in lengths:
            session_id = fresh_session_id()
            events = [new_event(tenant, session_id, seq, ts=start + timedelta(days=1, minutes=seq))
                      for seq in range(1, length + 1)]
            for event in events:
                await insert_event_as(conn, tenant, event)
            sessions[session_id] = events
    return sessions


async def set_policy(tenant: str, keep: str) -> None:
    """An admin's window for `tenant` (as the owner, tenant set, like every tenant write)."""
    async with owner_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        await conn.execute(
            "INSERT INTO retention_policies (tenant, keep, set_by) VALUES ($1, $2::text::interval, 'admin:test') "
            "ON CONFLICT (tenant) DO UPDATE SET keep = EXCLUDED.keep, set_at = now()", tenant, keep)


async def partition_exists(name: str) -> bool:
    async with service_connection() as conn:
        return await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"public.{name}")


async def test_maintenance_drops_a_partition_past_its_window_and_logs_count_and_chain_heads() -> None:
    await require_postgres()
    name, start, end = await fresh_month()
    tenant = fresh_tenant()
    sessions = await write_sessions(tenant, start, [3, 2])
    await set_policy(tenant, "1 day")

    dropped = await apply_retention(RetentionSettings().postgres_maintenance_dsn, None, end + DAY)

    [entry] = [e for e in dropped if e["partition_name"] == name]
    assert not await partition_exists(name)
    heads = sorted(({"tenant": tenant, "session_id": sid, "seq": len(events),
                     "hash": events[-1]["hash"]} for sid, events in sessions.items()),
                   key=lambda head: head["session_id"])
    assert (entry["range_from"], entry["range_to"], entry["event_count"]) == (start, end, 5)
    assert entry["chain_heads"] == heads
    assert entry["tenant_windows"] == {tenant: "1 day"}
    assert entry["dropped_by"] == "wakeline_maintenance"
    async with maintenance_connection() as conn:
        logged = await conn.fetchrow("SELECT * FROM retention_log WHERE id = $1", entry["id"])
    assert (logged["partition_name"], logged["event_count"]) == (name, 5)


async def test_partition_with_a_tenant_inside_its_window_is_kept() -> None:
    await require_postgres()
    name, start, end = await fresh_month()
    expired, inside = fresh_tenant(), fresh_tenant()
    await write_sessions(expired, start, [2])
    await write_sessions(inside, start, [1])
    await set_policy(expired, "1 day")
    await set_policy(inside, "1000 years")
    dsn = RetentionSettings().postgres_maintenance_dsn

    dropped = await apply_retention(dsn, None, end + DAY)
    plan = {c["partition_name"]: c for c in await plan_retention(dsn, None, end + DAY)}
    async with maintenance_connection() as conn:
        with pytest.raises(asyncpg.ObjectNotInPrerequisiteStateError, match=inside):
            await conn.fetchrow(DROP, name, datetime.now(UTC), timedelta(days=1))

    assert name not in {e["partition_name"] for e in dropped}
    assert plan[name]["blocking_tenants"] == [inside]
    assert await partition_exists(name)
    # Once the admin shortens the window, the same partition goes.
    await set_policy(inside, "1 day")
    async with maintenance_connection() as conn:
        entry = await conn.fetchrow(DROP, name, end + DAY, None)
    assert entry["event_count"] == 3 and not await partition_exists(name)


async def test_tenant_without_policy_is_kept_unless_a_default_window_is_given() -> None:
    await require_postgres()
    name, start, end = await fresh_month()
    await write_sessions(fresh_tenant(), start, [2])
    async with maintenance_connection() as conn:
        with pytest.raises(asyncpg.ObjectNotInPrerequisiteStateError):
            await conn.fetchrow(DROP, name, end + DAY, None)
        with pytest.raises(asyncpg.ObjectNotInPrerequisiteStateError):  # window not reached yet
            await conn.fetchrow(DROP, name, end + DAY, timedelta(days=2))
        entry = await conn.fetchrow(DROP, name, end + DAY, timedelta(days=1))
    assert entry["event_count"] == 2 and not await partition_exists(name)


async def test_a_cut_inside_or_after_now_never_reaches_a_partition_that_has_not_ended() -> None:
    await require_postgres()
    name, start, end = await fresh_month()
    await write_sessions(fresh_tenant(), start, [1])
    async with maintenance_connection() as conn:
        with pytest.raises(asyncpg.ObjectNotInPrerequisiteStateError, match="after the cut"):
            await conn.fetchrow(DROP, name, start + timedelta(days=15), timedelta(hours=1))
        # A caller cannot move the clock forward: the cut is never later than now().
        far_future = await conn.fetch(CANDIDATES, datetime(3000, 1, 1, tzinfo=UTC), DAY)
        now = await conn.fetchval("SELECT now()")
        await conn.fetchrow(DROP, name, end + DAY, DAY)  # clean up
    assert far_future and all(c["range_to"] <= now for c in far_future)


async def test_service_and_owner_logins_cannot_drop_or_detach_a_partition() -> None:
    await require_postgres()
    name, start, end = await fresh_month()
    tenant = fresh_tenant()
    await write_sessions(tenant, start, [2])
    async with service_connection() as conn:
        for statement in (f"ALTER TABLE events DETACH PARTITION {name}", f"DROP TABLE {name}",
                          "SELECT * FROM retention_log"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement)
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied for function"):
            await conn.fetchrow(DROP, name, end + DAY, DAY)
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied for function"):
            await conn.fetch(CANDIDATES, end + DAY, DAY)
    # The owner may execute its own function, but under FORCE RLS it would see no rows
    # and take a full partition for an empty one: refused outside a maintenance login.
    async with owner_connection() as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="only as wakeline_maintenance"):
            await conn.fetchrow(DROP, name, end + DAY, DAY)
    async with maintenance_connection() as conn:
        for statement in (f"ALTER TABLE events DETACH PARTITION {name}", f"DROP TABLE {name}",
                          "SELECT * FROM events", "INSERT INTO retention_log (partition_name, "
                          "range_from, range_to, event_count, chain_heads, tenant_windows, "
                          "dropped_by) VALUES ('x', now(), now(), 0, '[]', '{}', 'x')"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement)
    assert await partition_exists(name)
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        assert await conn.fetchval("SELECT count(*) FROM events WHERE tenant = $1", tenant) == 2
    async with maintenance_connection() as conn:
        await conn.fetchrow(DROP, name, end + DAY, DAY)  # clean up


async def test_existing_session_seq_with_another_ts_is_refused_even_after_its_partition_was_dropped() -> None:
    await require_postgres()
    name, start, end = await fresh_month()
    tenant = fresh_tenant()
    [(session_id, _)] = (await write_sessions(tenant, start, [1])).items()
    again_now = new_event(tenant, session_id, 1)
    async with service_connection() as conn:
        with pytest.raises(asyncpg.UniqueViolationError):
            await insert_event_as(conn, tenant, again_now)
    async with maintenance_connection() as conn:
        await conn.fetchrow(DROP, name, end + DAY, DAY)
    async with service_connection() as conn:
        with pytest.raises(asyncpg.UniqueViolationError, match="event_keys"):
            await insert_event_as(conn, tenant, again_now)
    assert not await partition_exists(name)


@pytest.mark.parametrize("connect", [service_connection, owner_connection])
async def test_a_dropped_month_is_never_created_again(connect) -> None:
    await require_postgres()
    name, start, end = await fresh_month()
    tenant = fresh_tenant()
    await write_sessions(tenant, start, [1])
    async with maintenance_connection() as conn:
        await conn.fetchrow(DROP, name, end + DAY, DAY)
    late = new_event(tenant, fresh_session_id(), 1, ts=start + timedelta(days=20))
    async with connect() as conn:
        for at in (start, start + timedelta(days=20), end - timedelta(microseconds=1)):
            with pytest.raises(asyncpg.PostgresError, match=f"{name} was dropped by retention") as refused:
                await conn.fetchval("SELECT ensure_events_partition($1)", at)
            assert refused.value.sqlstate == RETAINED_OUT_SQLSTATE
        # Without the function, an insert into the month finds no partition to land in.
        async with conn.transaction():
            await set_tenant(conn, tenant)
            with pytest.raises(asyncpg.CheckViolationError, match="no partition"):
                await conn.execute(INSERT_EVENT, *row_values(late))
    assert not await partition_exists(name)


async def test_retention_log_refuses_update_delete_and_truncate_even_by_its_owner() -> None:
    await require_postgres()
    name, start, end = await fresh_month()
    await write_sessions(fresh_tenant(), start, [1])
    async with maintenance_connection() as conn:
        entry = await conn.fetchrow(DROP, name, end + DAY, DAY)
    async with owner_connection() as conn:
        for statement in ("UPDATE retention_log SET event_count = 0 WHERE id = $1",
                          "DELETE FROM retention_log WHERE id = $1"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                await conn.execute(statement, entry["id"])
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await conn.execute("TRUNCATE retention_log")
        assert await conn.fetchval("SELECT event_count FROM retention_log WHERE id = $1",
                                   entry["id"]) == 1


@pytest.mark.parametrize("text,window", [("90d", timedelta(days=90)), ("12w", timedelta(weeks=12)),
                                         ("36h", timedelta(hours=36))])
def test_window_parses_days_weeks_and_hours(text: str, window: timedelta) -> None:
    assert parse_window(text) == window


@pytest.mark.parametrize("text", ["0d", "90", "d", "-3d", "1y"])
def test_window_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(ValueError):
        parse_window(text)


@pytest.mark.parametrize("target", ["events", "event_keys", "retention_log", "no_such_table",
                                    'events_y1950m01"; DROP TABLE events; --'])
async def test_drop_refuses_what_is_not_an_events_partition(target: str) -> None:
    await require_postgres()
    async with maintenance_connection() as conn:
        with pytest.raises((asyncpg.InvalidParameterValueError, asyncpg.UndefinedTableError)):
            await conn.fetchrow(DROP, target, datetime.now(UTC), DAY)
    async with service_connection() as conn:
        assert await conn.fetchval("SELECT to_regclass('public.events') IS NOT NULL")


# -- the archiver replaying into a dropped month -------------------------------------------

def chain(tenant: str, session_id: str, times: list[datetime], after: Event | None = None,
          text: str = "hello") -> list[Event]:
    """Sealed user messages at `times`, continuing `after` (or from seq 1)."""
    messages = [draft("user_message", actor="user:test", text=text) for _ in times]
    return sealed(messages, session_id, tenant=tenant, after=after, stamps=at(times, after))


class DroppedMonth:
    """A session of three events archived into a fresh far-past month, then the month dropped."""

    def __init__(self, pool: TenantPool, name: str, start: datetime, end: datetime) -> None:
        self.pool, self.name, self.start, self.end = pool, name, start, end
        self.tenant, self.session_id = fresh_tenant(), fresh_session_id()
        self.events = chain(self.tenant, self.session_id, [start + DAY + i * timedelta(minutes=1) for i in range(3)])
        self.group = f"test-retention-{uuid.uuid4().hex[:12]}"
        self.archive = PostgresEventStore(pool)  # as an archiver holds it: months cached

    async def create(self) -> DroppedMonth:
        assert await self.archive.archive(self.group, self.events, {}) == 3
        async with maintenance_connection() as conn:
            await conn.fetchrow(DROP, self.name, self.end + DAY, DAY)
        assert not await partition_exists(self.name)
        return self

    async def key_hashes(self) -> dict[int, str]:
        async with self.pool.transaction(self.tenant) as conn:
            rows = await conn.fetch("SELECT seq, encode(hash, 'hex') AS hash FROM event_keys WHERE session_id = $1",
                                    self.session_id)
        return {r["seq"]: r["hash"] for r in rows}


@pytest.fixture
async def dropped() -> AsyncIterator[DroppedMonth]:
    await require_postgres()
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=2) as pool:
        yield await DroppedMonth(pool, *await fresh_month()).create()


async def stored_offset(archive_group: str, topic: str) -> int | None:
    async with service_connection() as conn:
        return await conn.fetchval("SELECT next_offset FROM archiver_offsets WHERE consumer_group = $1 "
                                   "AND topic = $2", archive_group, topic)


@pytest.mark.parametrize("restarted", [False, True], ids=["same-archiver", "restarted-archiver"])
async def test_replaying_a_dropped_month_is_a_no_op_and_the_chain_continues_after_it(
        dropped: DroppedMonth, restarted: bool) -> None:
    # A restarted archiver has no months cached: it asks for the partition and is refused.
    group = f"test-retention-{uuid.uuid4().hex[:12]}"
    archive = PostgresEventStore(dropped.pool) if restarted else dropped.archive
    [after] = chain(dropped.tenant, dropped.session_id, [datetime.now(UTC)], after=dropped.events[-1])

    stored = await archive.archive(group, [*dropped.events, after], {("wakeline.events", 0): 42})

    assert stored == 1  # only the event after the cut, linked to the tombstone's hash
    assert not await partition_exists(dropped.name)
    assert await dropped.key_hashes() == {e.seq: e.hash for e in [*dropped.events, after]}
    if restarted:
        assert await stored_offset(group, "wakeline.events") == 42
    assert await archive.archive(group, dropped.events, {}) == 0  # and again, from the cache


async def test_another_hash_for_a_key_in_a_dropped_month_is_still_a_conflict(dropped: DroppedMonth) -> None:
    first = dropped.events[0]
    [impostor] = chain(dropped.tenant, dropped.session_id, [first.ts], text="a different history")
    for archive in (dropped.archive, PostgresEventStore(dropped.pool)):
        with pytest.raises(ConflictingEvent) as raised:
            await archive.archive("test-retention-conflict", [impostor], {})
        assert (raised.value.session_id, raised.value.seq) == (dropped.session_id, 1)
        assert (raised.value.stored_hash, raised.value.incoming_hash) == (first.hash, impostor.hash)
    assert not await partition_exists(dropped.name)
    assert await dropped.key_hashes() == {e.seq: e.hash for e in dropped.events}


async def test_a_new_event_in_a_dropped_month_stops_the_archiver_without_resurrecting_it(
        dropped: DroppedMonth) -> None:
    [late] = chain(dropped.tenant, dropped.session_id, [dropped.start + 20 * DAY], after=dropped.events[-1])
    with pytest.raises(RetainedOutEvent, match="dropped by retention") as raised:
        await PostgresEventStore(dropped.pool).archive("test-retention-late", [late], {})
    assert (raised.value.session_id, raised.value.seq) == (dropped.session_id, 4)
    # The archiver that still believes the month exists finds no partition to insert into.
    with pytest.raises(asyncpg.CheckViolationError, match="no partition"):
        await dropped.archive.archive(dropped.group, [late], {})
    assert not await partition_exists(dropped.name)
    assert 4 not in await dropped.key_hashes()
