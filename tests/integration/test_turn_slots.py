"""Migration 0027 in the real database: the running-sessions quota's slots. A tenant's slots
are granted up to its quota (its own, else the default), then in arrival order as they are
given back; two brains asking at once never both get the last one; a raised quota grants the
waiting; and the sweep drops a slot a crash left with a session out of its turn and re-offers
a grant whose wake was lost. The brain's side: tests/unit/test_brain_turn_slots.py, and the
whole path in tests/e2e/test_fair_share.py."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from conftest_pg import fresh_session_id, fresh_tenant, postgres_event_store, require_postgres, service_connection
from conftest_pg import set_tenant
from tests.factories import LIVE, draft, sealed
from wakeline.runtime.settings import CommonSettings
from wakeline.storage.pg import TenantPool
from wakeline.storage.turn_slots import PostgresTurnSlots

pytestmark = pytest.mark.postgres


async def set_running_quota(tenant: str, limit: int) -> None:
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        await conn.execute("INSERT INTO tenant_quotas (tenant, running_sessions, set_by) VALUES ($1, $2, 'user:adam') "
                           "ON CONFLICT (tenant) DO UPDATE SET running_sessions = EXCLUDED.running_sessions",
                           tenant, limit)


async def test_slots_are_granted_up_to_the_quota_then_in_arrival_order() -> None:
    await require_postgres()
    tenant, other = fresh_tenant(), fresh_tenant()
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=2) as pool:
        slots = PostgresTurnSlots(pool, default_limit=2)
        a, b, c, d = (f"s-{uuid.uuid4().hex[:8]}" for _ in range(4))
        assert [(await slots.take(tenant, s)).granted for s in (a, b)] == [True, True]
        third = await slots.take(tenant, c)
        assert (third.granted, third.running, third.limit) == (False, 2, 2)
        assert (await slots.take(tenant, d)).granted is False
        assert (await slots.take(tenant, a)).granted is True  # held already: asked again after a crash
        assert (await slots.take(other, "o-" + a)).granted is True  # another tenant's count is its own
        assert await slots.release(tenant, b) == (c,)  # the head of the queue, granted in its absence
        assert (await slots.take(tenant, d)).granted is False  # d arrived after c
        assert (await slots.take(tenant, c)).granted is True
        assert await slots.release(tenant, d) == ()  # d leaves the queue (cancelled while waiting)
        assert await slots.release(tenant, a) == ()
        fresh = await slots.take(tenant, d)
        assert (fresh.granted, fresh.running) == (True, 2)


async def test_the_tenants_own_quota_beats_the_default_and_a_raise_grants_the_waiting() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    await set_running_quota(tenant, 1)
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=2) as pool:
        slots = PostgresTurnSlots(pool, default_limit=100)
        first, second, third = (f"s-{uuid.uuid4().hex[:8]}" for _ in range(3))
        assert (await slots.take(tenant, first)).granted is True
        refused = await slots.take(tenant, second)
        assert (refused.granted, refused.limit) == (False, 1)
        assert (await slots.take(tenant, third)).granted is False
        await set_running_quota(tenant, 3)
        answer = await slots.take(tenant, third)  # second is ahead: granted on the way, owed a wake
        assert (answer.granted, answer.running, answer.limit, answer.woken) == (True, 3, 3, (second,))


async def test_two_brains_asking_at_once_never_exceed_the_quota() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    async with TenantPool(CommonSettings().postgres_dsn, min_size=6, max_size=6) as pool:
        slots = PostgresTurnSlots(pool, default_limit=3)
        sessions = [f"s-{uuid.uuid4().hex[:8]}" for _ in range(12)]
        answers = await asyncio.gather(*(slots.take(tenant, s) for s in sessions))
        assert sum(a.granted for a in answers) == 3
        queued = [s for s, a in zip(sessions, answers) if not a.granted]
        granted = [s for s, a in zip(sessions, answers) if a.granted]
        woken = await asyncio.gather(*(slots.release(tenant, s) for s in granted))
        granted_on = [w for ws in woken for w in ws]
        # three of the queued (those Postgres queued first: their arrival there, not this list's order), once each
        assert len(granted_on) == 3 == len(set(granted_on)) and set(granted_on) <= set(queued)


async def test_the_sweep_drops_a_slot_left_by_a_crash_and_reoffers_a_lost_wake() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    idle = fresh_session_id()
    log = sealed([draft("session_created", "cmd-create", config={}, owner="user:ann"),
                  draft("user_message", "cmd-1", text="hi")], idle, tenant=tenant, stamps=LIVE)
    async with postgres_event_store() as store:
        await store.archive(f"test-slots-{uuid.uuid4().hex[:8]}", log, {("test-slots", 0): len(log)})
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=2) as pool:
        waiting = f"s-{uuid.uuid4().hex[:8]}"
        slots = PostgresTurnSlots(pool, default_limit=1, stale_s=0.0, wake_s=3600.0)
        assert (await slots.take(tenant, idle)).granted is True  # its brain died before giving it back
        assert (await slots.take(tenant, waiting)).granted is False
        owed = await slots.sweep()
        assert (tenant, waiting) in owed  # the idle session's slot went to the head of the queue
        assert (tenant, idle) not in owed
        late = PostgresTurnSlots(pool, default_limit=1, stale_s=3600.0, wake_s=0.0)
        assert (tenant, waiting) in await late.sweep()  # not started yet: its wake is sent again
        assert (await slots.take(tenant, waiting)).granted is True
        assert (tenant, waiting) not in await late.sweep()  # started: nothing owed
