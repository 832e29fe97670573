"""Waking a session reads its log under the tenant that owns it, whoever's input woke it."""

from __future__ import annotations

import uuid

import pytest

from conftest_pg import fresh_session_id, fresh_tenant, insert_event_as, new_event, require_kafka, \
    require_postgres, service_connection
from wakeline.pg import TenantPool
from wakeline.settings import CommonSettings
from wakeline.topics import partition_for
from wakeline_brain.wake import SessionLoader, SessionParked, tail_consumer


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
        loader = SessionLoader(pool, tail, f"test-wake-{uuid.uuid4().hex[:8]}")
        await tail.start()
        try:
            partition = partition_for(sid, settings.partitions)
            events = await loader.load(sid, intruder, partition)
            unknown = await loader.load(fresh_session_id(), intruder, partition)
        finally:
            await tail.stop()
    assert [(e.tenant, e.seq, e.payload.text) for e in events] == [(owner, 1, "mine")]
    assert unknown == []


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
        loader = SessionLoader(pool, tail, group)
        await tail.start()
        try:
            with pytest.raises(SessionParked, match="parked it from seq 2: conflicting event"):
                await loader.load(sid, tenant, partition_for(sid, settings.partitions))
        finally:
            await tail.stop()
