"""Migrations 0032 and 0033 in a database of their own: the deployment's sessions at work shared fairly.

While more than one tenant holds or waits for a slot, a tenant is held to the larger of an equal
share of the total and what the others leave of it (at least one), under its own quota; alone, to
its quota only. A tenant that gave a slot back within the linger (10 s) still shares the total,
holding the most it held then (up to an equal share). Nothing is taken from a tenant over its
share: it is granted no more until its own turns' ends bring it under. The same scripts run
against the brain's unit-test double (`MemoryTurnSlots`), which must keep the same rules; each
gets `forget`, which moves a tenant's last release past the linger (the Postgres row's time, the
double's clock). A database of its own because the share counts every tenant's slots, and other
tests leave theirs in the shared one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from conftest_pg import database_before, require_postgres
from wakeline.storage.pg import TenantPool
from wakeline.storage.turn_slots import LINGER_S, MemoryTurnSlots, PostgresTurnSlots, TurnSlots, share

pytestmark = pytest.mark.postgres


@pytest.fixture
async def dsn(tmp_path: Path) -> AsyncIterator[str]:
    await require_postgres()
    async with database_before(34, tmp_path) as admin_dsn:
        yield admin_dsn


Forget = Callable[[str], Awaitable[None]]


def forgetting_in(dsn: str) -> Forget:
    async def forget(tenant: str) -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("UPDATE turn_slot_seen SET released_at = released_at - turn_slot_linger()"
                               " - interval '1 second' WHERE tenant = $1", tenant)
        finally:
            await conn.close()
    return forget


def memory(**kwargs: int) -> tuple[MemoryTurnSlots, Forget]:
    """The double on a clock of its own; its `forget` moves the clock past the linger (every tenant's)."""
    now = [0.0]

    async def forget(tenant: str) -> None:
        now[0] += LINGER_S + 1
    return MemoryTurnSlots(clock=lambda: now[0], **kwargs), forget


async def _shared_fairly(slots: TurnSlots, forget: Forget) -> None:
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
    # B gone: for the linger, it still holds what it held at most (2) against A's next.
    assert not (await slots.take("A", "a7")).granted  # A holds 2 (a4, a5), max(2, 4 - 2) = 2
    await forget("B")
    assert await slots.release("A", "a7") == ()  # (its queue place given up)
    # A alone again: its quota only, past the total.
    assert [(await slots.take("A", s)).granted for s in (a[5], a[6], "a7", "a8", "a9")] == [True] * 5


async def _given_back_at_the_next_turn(slots: TurnSlots, forget: Forget) -> None:
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
    await forget("B")  # past the linger
    assert await slots.release("A", "a3") == ("a0", "a1")  # alone again: its quota, in arrival order
    assert (await slots.keep("A", "a9")).granted  # holding none: answered as a take


async def _kept_through_a_pause(slots: TurnSlots, forget: Forget) -> None:
    """Total 6, every tenant's quota 10: a tenant between two bursts keeps its share for the
    linger, holding the most it held at a release then; the tenant beside it does not grow into it."""
    for s in ("b0", "b1", "b2", "b3"):
        assert (await slots.take("B", s)).granted  # alone
    for s in ("b0", "b1", "b2", "b3"):
        await slots.release("B", s)  # B's burst is over: 4 at its first release, its peak
    # A arrives beside B's pause: B still counts, holding min(4, 6 / 2) = 3, so A's share is 3.
    answers = [await slots.take("A", f"a{n}") for n in range(5)]
    assert [a.granted for a in answers] == [True, True, True, False, False] and answers[-1].limit == 3
    # B's next burst finds its share free: max(3, 6 - 3) = 3, at once, no one to wait for.
    assert [(await slots.take("B", s)).granted for s in ("b4", "b5", "b6", "b7")] == [True, True, True, False]
    for s in ("b4", "b5", "b6", "b7"):
        await slots.release("B", s)
    await forget("B")  # past the linger: A alone, its quota only; its next release grants its queue
    assert await slots.release("A", "a0") == ("a3", "a4")
    # A tenant that held one slot keeps one: C's peak is 1, so A's share is max(3, 6 - 1) = 5.
    assert (await slots.take("C", "c0")).granted
    await slots.release("C", "c0")
    standing = await slots.take("A", "a5")
    assert (standing.granted, standing.running, standing.limit) == (True, 5, 5)


async def test_postgres_shares_the_total_between_the_tenants_that_want_slots(dsn: str) -> None:
    async with TenantPool(dsn, min_size=1, max_size=2) as pool:
        await _shared_fairly(PostgresTurnSlots(pool, default_limit=10, total=4), forgetting_in(dsn))


async def test_postgres_gives_a_held_slot_back_at_the_next_turn_over_the_share(dsn: str) -> None:
    async with TenantPool(dsn, min_size=1, max_size=2) as pool:
        await _given_back_at_the_next_turn(PostgresTurnSlots(pool, default_limit=10, total=4, check_s=0),
                                           forgetting_in(dsn))


async def test_postgres_keeps_a_pausing_tenants_share_for_the_linger(dsn: str) -> None:
    async with TenantPool(dsn, min_size=1, max_size=2) as pool:
        await _kept_through_a_pause(PostgresTurnSlots(pool, default_limit=10, total=6), forgetting_in(dsn))
        conn = await asyncpg.connect(dsn)
        try:  # what is left of a release: a row per tenant, written only with a total
            assert (await conn.fetchrow("SELECT * FROM take_turn_slot('D', 'd0', 10)"))["granted"]
            await conn.fetchval("SELECT release_turn_slot('D', 'd0', 10)")  # a brain without a total
            rows = {r["tenant"]: r["peak"] for r in await conn.fetch("SELECT tenant, peak FROM turn_slot_seen")}
        finally:
            await conn.close()
        assert rows == {"A": 3, "B": 4, "C": 1}  # B's: its first burst's peak, kept through its second


async def test_the_brains_double_keeps_the_same_rules() -> None:
    await _shared_fairly(*memory(default_limit=10, total=4))
    await _given_back_at_the_next_turn(*memory(default_limit=10, total=4))
    await _kept_through_a_pause(*memory(default_limit=10, total=6))


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


@pytest.mark.parametrize(("others", "tenants", "gone", "expected"), [
    (0, 2, [10], 10),       # a tenant in its pause holds what it held, up to an equal share: 20 - 10
    (0, 2, [4], 16),        # what it held, when less
    (5, 3, [1, 1], 13),     # each gone tenant its own
    (10, 3, [10], 7),       # never less than an equal share
])
def test_share_with_tenants_gone_within_the_linger(others, tenants, gone, expected) -> None:
    assert share(None, 20, others, tenants, gone) == expected


async def test_a_slot_the_brain_grants_another_tenant_makes_its_next_keep_look_again(dsn: str) -> None:
    now = [0.0]  # the clock stands still: only the grant can make it look
    async with TenantPool(dsn, min_size=1, max_size=2) as pool:
        slots = PostgresTurnSlots(pool, default_limit=10, total=4, check_s=1.0, clock=lambda: now[0])
        for s in ("a0", "a1", "a2"):
            assert (await slots.take("A", s)).granted  # alone: limit 10, as A's standing says
        assert (await slots.take("B", "b0")).granted
        assert (await slots.take("B", "b1")).granted  # A's share: max(2, 4 - 2) = 2, A holds 3
        assert not (await slots.keep("A", "a0")).granted
