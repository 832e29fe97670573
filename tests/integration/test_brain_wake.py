"""Waking a session reads its log under the tenant that owns it, whoever's input woke it."""

from __future__ import annotations

import uuid

import pytest

from conftest_pg import fresh_session_id, fresh_tenant, insert_event_as, new_event, require_kafka, \
    require_postgres, service_connection
from tests.factories import LIVE, draft, sealed
from wakeline.storage.event_statements import insert_events
from wakeline.contract.events import SnapshotTaken
from wakeline.log.fold import fold
from wakeline.storage.pg import TenantPool
from wakeline.storage.postgres_store import PostgresEventStore
from wakeline.log.snapshots import checked_fold, resume, snapshot_payload
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import partition_for
from wakeline_brain.tail_reads import TailReader, tail_consumer
from wakeline_brain.wake import SessionLoader, SessionParked


async def test_a_session_woken_by_another_tenants_input_loads_its_owners_log():
    settings = CommonSettings()
    await require_postgres()
    await require_kafka(settings)
    owner, intruder, sid = fresh_tenant(), fresh_tenant(), fresh_session_id()
    async with service_connection() as conn:
        await insert_event_as(conn, owner, new_event(owner, sid, 1, type="user_message", payload={"text": "mine"}))
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
        # A private archiver group: no stored offset, so the whole events partition is the tail.
        tail = tail_consumer(settings)
        loader = SessionLoader(PostgresEventStore(pool), TailReader(tail), f"test-wake-{uuid.uuid4().hex[:8]}")
        await tail.start()
        try:
            partition = partition_for(sid, settings.partitions)
            events = await loader.load(sid, intruder, partition)
            unknown = await loader.load(fresh_session_id(), intruder, partition)
        finally:
            await tail.stop()
    assert [(e.tenant, e.seq, e.payload.text) for e in events] == [(owner, 1, "mine")]
    assert unknown == []


async def test_a_new_sessions_wake_asks_only_where_the_archive_stands_not_for_its_rows():
    """No key under any tenant means no row: the wake of a session id the archive has never
    seen skips the snapshot and row reads (3 round trips, not 5); a known one still reads them."""
    settings = CommonSettings()
    await require_postgres()
    await require_kafka(settings)
    tenant, known, new = fresh_tenant(), fresh_session_id(), fresh_session_id()
    async with service_connection() as conn:
        await insert_event_as(conn, tenant, new_event(tenant, known, 1, type="user_message", payload={"text": "hi"}))
    asked: list[str] = []

    async def logged(conn) -> None:
        conn.add_query_logger(lambda record: asked.append(record.query))

    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=1, init=logged) as pool:
        tail = tail_consumer(settings)
        loader = SessionLoader(PostgresEventStore(pool), TailReader(tail), f"test-wake-{uuid.uuid4().hex[:8]}")
        await tail.start()
        try:
            asked.clear()
            assert await loader.load(new, tenant, partition_for(new, settings.partitions)) == []
            for_new = list(asked)
            asked.clear()
            assert [e.seq for e in await loader.load(known, tenant, partition_for(known, settings.partitions))] == [1]
            for_known = list(asked)
        finally:
            await tail.stop()
    reads = [q for q in for_new if "FROM events" in q]
    assert any("session_tenant" in q for q in for_new) and reads == [], for_new
    assert len([q for q in for_known if "FROM events" in q]) == 2, for_known


async def test_the_owner_of_a_session_is_found_by_its_first_key_with_or_without_seq_1():
    """`session_tenant` (0014) reads seq 1 by its key, and falls back to the lowest seq."""
    await require_postgres()
    owner, sid, late = fresh_tenant(), fresh_session_id(), fresh_session_id()
    async with service_connection() as conn:
        for seq in (1, 2, 3):
            await insert_event_as(conn, owner, new_event(owner, sid, seq, type="user_message", payload={"text": "x"}))
        await insert_event_as(conn, owner, new_event(owner, late, 7, type="user_message", payload={"text": "y"}))
        assert await conn.fetchval("SELECT session_tenant($1)", sid) == owner
        assert await conn.fetchval("SELECT session_tenant($1)", late) == owner
        assert await conn.fetchval("SELECT session_tenant($1)", fresh_session_id()) is None
        # the lookup leaves nothing behind: the next statement sees no other session's keys
        assert await conn.fetchval("SELECT coalesce(current_setting('wakeline.owner_lookup', true), '')") == ""


async def test_a_session_the_archiver_parked_is_not_woken_from_a_short_history():
    settings = CommonSettings()
    await require_postgres()
    tenant, sid, group = fresh_tenant(), fresh_session_id(), f"test-wake-{uuid.uuid4().hex[:8]}"
    async with service_connection() as conn:
        await insert_event_as(conn, tenant, new_event(tenant, sid, 1, type="user_message", payload={"text": "a"}))
        await conn.execute(
            "INSERT INTO archiver_quarantine (tenant, session_id, from_seq, reason, topic, partition, \"offset\","
            " consumer_group) VALUES ($1, $2, 2, 'conflicting event', 'wakeline.events', 0, 7, $3)",
            tenant, sid, group)
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
        tail = tail_consumer(settings)
        loader = SessionLoader(PostgresEventStore(pool), TailReader(tail), group)
        await tail.start()
        try:
            with pytest.raises(SessionParked, match="parked it from seq 2: conflicting event"):
                await loader.load(sid, tenant, partition_for(sid, settings.partitions))
        finally:
            await tail.stop()


def exchange(turn: int) -> list:
    """A user message, the model's tool call, its result: one input each with its own id."""
    return [draft("user_message", f"cmd-{turn}", text=f"question {turn}"),
            draft("model_turn", text="Let me look."),
            draft("tool_call", tool_call_id=f"tc-{turn}", name="bash", input={"cmd": "ls"}),
            draft("tool_result", f"result:tc-{turn}", tool_call_id=f"tc-{turn}", name="bash", output="a.txt\n")]


def brain_log(tenant: str, sid: str, turns: int, snapshot=snapshot_payload) -> list:
    """Sealed as a running brain does (now, fresh ids): a snapshot after each turn but the
    last, so three events follow the newest."""
    log = sealed([draft("session_created", "cmd-create", config={}, owner="user:ann")], sid, tenant=tenant,
                 stamps=LIVE)
    for turn in range(1, turns + 1):
        log += sealed(exchange(turn), sid, tenant=tenant, after=log[-1], stamps=LIVE)
        if turn < turns:
            log += sealed([draft(snapshot(fold(log)))], sid, tenant=tenant, after=log[-1], stamps=LIVE)
    return log[:-1]


async def woken(settings: CommonSettings, tenant: str, log: list) -> list:
    """The events a wake loads of `log` once it is archived (the Kafka tail is empty)."""
    sid = log[0].session_id
    async with service_connection() as conn, conn.transaction():
        await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", tenant)
        await insert_events(conn, log)
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
        tail = tail_consumer(settings)
        loader = SessionLoader(PostgresEventStore(pool), TailReader(tail), f"test-wake-{uuid.uuid4().hex[:8]}")
        await tail.start()
        try:
            return await loader.load(sid, tenant, partition_for(sid, settings.partitions))
        finally:
            await tail.stop()


async def test_a_wake_reads_from_the_newest_snapshot_and_resumes_to_the_whole_logs_state():
    settings = CommonSettings()
    await require_postgres()
    await require_kafka(settings)
    tenant = fresh_tenant()
    log = brain_log(tenant, fresh_session_id(), turns=5)
    loaded = await woken(settings, tenant, log)
    newest = max(e.seq for e in log if isinstance(e, SnapshotTaken))
    assert [e.seq for e in loaded] == list(range(newest, len(log) + 1))
    assert resume(loaded) == fold(log) == checked_fold(log)  # each snapshot holds its prefix
    assert all(resume(loaded).has_seen(cmd) for cmd in ("cmd-create", "cmd-1", "cmd-4"))


async def test_a_wake_whose_newest_snapshot_is_of_another_format_reads_the_whole_log():
    settings = CommonSettings()
    await require_postgres()
    await require_kafka(settings)
    tenant = fresh_tenant()

    def older(state):
        return snapshot_payload(state).model_copy(update={"format": "0.older-code"})

    log = brain_log(tenant, fresh_session_id(), turns=3, snapshot=older)
    loaded = await woken(settings, tenant, log)
    assert [e.seq for e in loaded] == list(range(1, len(log) + 1))
    assert resume(loaded) == fold(log)
