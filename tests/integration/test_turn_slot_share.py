"""Migration 0032 in a database of its own: the deployment's sessions at work shared fairly.

While more than one tenant holds or waits for a slot, a tenant is held to the larger of an equal
share of the total and what the others leave of it (at least one), under its own quota; alone, to
its quota only. Nothing is taken from a tenant over its share: it is granted no more until its
own turns' ends bring it under. The same script runs against the brain's unit-test double
(`MemoryTurnSlots`), which must keep the same rules. A database of its own because the share
counts every tenant's slots, and other tests leave theirs in the shared one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from conftest_pg import database_before, require_postgres
from wakeline.storage.pg import TenantPool
from wakeline.storage.turn_slots import MemoryTurnSlots, PostgresTurnSlots, TurnSlots, share

pytestmark = pytest.mark.postgres


@pytest.fixture
async def dsn(tmp_path: Path) -> AsyncIterator[str]:
    await require_postgres()
    async with database_before(33, tmp_path) as admin_dsn:
        yield admin_dsn


async def _shared_fairly(slots: TurnSlots) -> None:
    """Total 4, every tenant's quota 10."""
    a = [f"a{n}" for n in range(7)]
    b = [f"b{n}" for n in range(3)]
    # Alone, a tenant is held to its quota only: the total is where sharing begins.
    assert [(await slots.take("A", s)).granted for s in a[:5]] == [True] * 5
    # B arrives: its share is max(4 / 2, 4 - 5, 1) = 2.
    assert [(await slots.take("B", s)).granted for s in b[:2]] == [True, True]
    third = await slots.take("B", b[2])
    assert (third.granted, third.running, third.limit) == (False, 2, 2)
    # A, over its share (max(2, 4 - 2) = 2), keeps its five at work and is granted no more.
    sixth = await slots.take("A", a[5])
    assert (sixth.granted, sixth.running, sixth.limit) == (False, 5, 2)
    assert (await slots.take("A", a[0])).granted is True  # a slot it holds is still its own
    for s in a[:3]:
        assert await slots.release("A", s) == ()  # 4, 3, 2 left: not under its share yet
    assert await slots.release("A", a[3]) == (a[5],)  # 1 left: its queue's head is granted
    # B's queue moves on B's own turn ends: share max(2, 4 - 2) = 2, one held.
    assert await slots.release("B", b[0]) == (b[2],)
    assert (await slots.take("B", b[2])).granted is True
    for s in (b[1], b[2]):
        await slots.release("B", s)
    # A alone again: its quota only, past the total.
    assert [(await slots.take("A", s)).granted for s in (a[5], a[6], "a7", "a8", "a9")] == [True] * 5


async def _given_back_at_the_next_turn(slots: TurnSlots) -> None:
    """Total 4, every tenant's quota 10: `keep`, asked where a session holding a slot starts its
    next turn, gives the slot back while its tenant holds more than its share."""
    for s in ("a0", "a1", "a2", "a3"):
        assert (await slots.take("A", s)).granted
    assert (await slots.keep("A", "a0")).granted  # alone: its quota only
    assert (await slots.take("B", "b0")).granted  # A's share: max(4 / 2, 4 - 1) = 3
    given = await slots.keep("A", "a0")
    assert (given.granted, given.running, given.limit) == (False, 3, 3)
    assert (await slots.keep("A", "a1")).granted  # 3 of 3: kept
    assert (await slots.take("B", "b1")).granted  # A's share: max(2, 4 - 2) = 2
    assert not (await slots.keep("A", "a1")).granted
    kept = await slots.keep("A", "a2")
    assert (kept.granted, kept.running, kept.limit) == (True, 2, 2)
    assert not (await slots.take("A", "a0")).granted  # still queued, a1 behind it
    for s in ("b0", "b1"):
        assert await slots.release("B", s) == ()
    assert await slots.release("A", "a3") == ("a0", "a1")  # alone again: its quota, in arrival order
    assert (await slots.keep("A", "a9")).granted  # holding none: answered as a take


async def test_postgres_shares_the_total_between_the_tenants_that_want_slots(dsn: str) -> None:
    async with TenantPool(dsn, min_size=1, max_size=2) as pool:
        await _shared_fairly(PostgresTurnSlots(pool, default_limit=10, total=4))


async def test_postgres_gives_a_held_slot_back_at_the_next_turn_over_the_share(dsn: str) -> None:
    async with TenantPool(dsn, min_size=1, max_size=2) as pool:
        await _given_back_at_the_next_turn(PostgresTurnSlots(pool, default_limit=10, total=4, check_s=0))


async def test_the_brains_double_keeps_the_same_rules() -> None:
    await _shared_fairly(MemoryTurnSlots(default_limit=10, total=4))
    await _given_back_at_the_next_turn(MemoryTurnSlots(default_limit=10, total=4))


async def test_a_brain_looks_at_its_tenants_standing_once_per_check_unless_it_was_over(dsn: str) -> None:
    """`keep` costs a statement per tenant per `check_s`, or while the tenant was over its share."""
    now = [0.0]
    async with TenantPool(dsn, min_size=1, max_size=2) as pool:
        slots = PostgresTurnSlots(pool, default_limit=10, total=4, check_s=1.0, clock=lambda: now[0])
        for s in ("a0", "a1", "a2"):
            assert (await slots.take("A", s)).granted
        other = PostgresTurnSlots(pool, default_limit=10, total=4)  # another brain
        assert (await other.take("B", "b0")).granted
        assert (await other.take("B", "b1")).granted  # A's share: max(2, 4 - 2) = 2, A holds 3
        assert (await slots.keep("A", "a0")).granted  # what the take said a moment ago: under
        now[0] = 1.0  # a second later it looks again
        assert not (await slots.keep("A", "a0")).granted
        assert (await slots.keep("A", "a1")).granted  # the yield's answer: 2 of 2


async def test_without_a_total_and_through_the_older_functions_each_tenant_has_its_quota(dsn: str) -> None:
    async with TenantPool(dsn, min_size=1, max_size=2) as pool:
        slots = PostgresTurnSlots(pool, default_limit=3)
        assert [(await slots.take("A", f"a{n}")).granted for n in range(4)] == [True, True, True, False]
        assert [(await slots.take("B", f"b{n}")).granted for n in range(3)] == [True, True, True]
    # A brain of before 0032 calls the three-argument forms: the same, with no total.
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow("SELECT * FROM take_turn_slot('B', 'b3', 3)")
        assert (row["granted"], row["running"], row["slot_limit"]) == (False, 3, 3)
        assert await conn.fetchval("SELECT release_turn_slot('A', 'a0', 3)") == ["a3"]
        assert await conn.fetch("SELECT * FROM sweep_turn_slots(3, 60, 0)") != []  # a3, granted in its absence
    finally:
        await conn.close()


@pytest.mark.parametrize(("limit", "total", "others", "tenants", "expected"), [
    (10, None, 50, 3, 10),   # no total: the quota only
    (10, 4, 50, 1, 10),      # alone: the quota only
    (None, 4, 50, 1, None),  # alone and unlimited
    (10, 4, 5, 2, 2),        # an equal share of what is over-asked
    (10, 20, 3, 2, 10),      # what the others leave, capped by the quota
    (None, 20, 3, 2, 17),    # what the others leave
    (10, 4, 3, 9, 1),        # never less than one
])
def test_share(limit, total, others, tenants, expected) -> None:
    assert share(limit, total, others, tenants) == expected


async def test_a_slot_the_brain_grants_another_tenant_makes_its_next_keep_look_again(dsn: str) -> None:
    now = [0.0]  # the clock stands still: only the grant can make it look
    async with TenantPool(dsn, min_size=1, max_size=2) as pool:
        slots = PostgresTurnSlots(pool, default_limit=10, total=4, check_s=1.0, clock=lambda: now[0])
        for s in ("a0", "a1", "a2"):
            assert (await slots.take("A", s)).granted  # alone: limit 10, as A's standing says
        assert (await slots.take("B", "b0")).granted
        assert (await slots.take("B", "b1")).granted  # A's share: max(2, 4 - 2) = 2, A holds 3
        assert not (await slots.keep("A", "a0")).granted
