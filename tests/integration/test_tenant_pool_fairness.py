"""A `fair` `TenantPool` hands its connections round robin across the tenants waiting for one.

asyncpg's own pool serves waiters in arrival order, so a tenant with many statements queued
made another tenant's one statement wait behind all of them (issue 34: the brain's running-slot
takes behind another tenant's burst of wakes). Each test holds the pool's only connection
until every waiter is queued, then lets go and records the order the statements ran in: by
events, not by timing. The same queue on a pool that is not fair is the control: there the
other tenant runs last, so the fair order is the pool's doing.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from conftest_pg import require_postgres
from wakeline.runtime.settings import CommonSettings
from wakeline.storage.pg import TenantPool

pytestmark = pytest.mark.postgres


async def _queue_behind_a_held_connection(pool: TenantPool, flood: int) -> list[str]:
    """`flood` statements of tenant `flood`, then one transaction of tenant `steady`, all queued
    while a statement of `flood` holds the only connection; the order they ran in."""
    ran: list[str] = []
    holding, let_go = asyncio.Event(), asyncio.Event()

    async def held(conn: asyncpg.Connection) -> int:
        holding.set()
        await let_go.wait()
        return await conn.fetchval("SELECT 1")

    async def statement(conn: asyncpg.Connection, name: str) -> int:
        ran.append(name)
        return await conn.fetchval("SELECT 1")

    async def steady() -> None:
        async with pool.transaction("steady") as conn:
            ran.append("steady")
            assert await conn.fetchval("SELECT current_setting('wakeline.tenant')") == "steady"

    first = asyncio.create_task(pool.system_statement(held, for_tenant="flood"))
    await asyncio.wait_for(holding.wait(), 10)
    waiting = [asyncio.create_task(pool.system_statement(statement, f"flood-{n}", for_tenant="flood"))
               for n in range(flood)]
    await asyncio.sleep(0.05)  # every flood statement is queued before steady's
    waiting.append(asyncio.create_task(steady()))
    await asyncio.sleep(0.05)
    let_go.set()
    await asyncio.wait_for(asyncio.gather(first, *waiting), 20)
    return ran


async def test_a_tenant_s_statement_waits_for_one_of_another_tenant_s_not_all_of_them() -> None:
    await require_postgres()
    async with TenantPool(CommonSettings().postgres_dsn, fair=True, min_size=1, max_size=1) as pool:
        ran = await _queue_behind_a_held_connection(pool, flood=5)
    # flood's first waiter came first and takes the connection the held statement gives back;
    # the next one goes to steady, whose turn is next, not to flood's second.
    assert ran == ["flood-0", "steady"] + [f"flood-{n}" for n in range(1, 5)]


async def test_without_fair_the_same_queue_is_served_in_arrival_order() -> None:
    await require_postgres()
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=1) as pool:
        ran = await _queue_behind_a_held_connection(pool, flood=5)
    assert ran == [f"flood-{n}" for n in range(5)] + ["steady"]


async def test_a_turn_is_given_back_by_a_block_that_raised_and_by_a_waiter_cancelled() -> None:
    await require_postgres()
    async with TenantPool(CommonSettings().postgres_dsn, fair=True, min_size=1, max_size=1) as pool:
        with pytest.raises(asyncpg.PostgresError):
            async with pool.transaction("a") as conn:
                await conn.execute("SELECT 1 / 0")
        holding, let_go = asyncio.Event(), asyncio.Event()

        async def held(conn: asyncpg.Connection) -> int:
            holding.set()
            await let_go.wait()
            return 1

        first = asyncio.create_task(pool.system_statement(held, for_tenant="a"))
        await asyncio.wait_for(holding.wait(), 10)
        cancelled = asyncio.create_task(pool.system_statement(held, for_tenant="b"))
        await asyncio.sleep(0.05)
        cancelled.cancel()
        let_go.set()
        assert await asyncio.wait_for(first, 10) == 1
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        # Neither left a turn taken: with one connection, every tenant still gets it.
        for tenant in ("a", "b", None):
            assert await asyncio.wait_for(
                pool.system_statement(lambda conn: conn.fetchval("SELECT 7"), for_tenant=tenant), 10) == 7
        await asyncio.sleep(0.2)  # the last release (its reset) runs after the answer
        assert pool._fair is not None and pool._fair.in_use == 0 and pool._fair.waiting == 0
