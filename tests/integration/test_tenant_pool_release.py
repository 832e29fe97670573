"""`TenantPool` hands a connection back in the background once the caller has its answer.

asyncpg resets a connection when it is released (one more round trip); the pool now runs
that after the block that used the connection has ended, so a request does not wait for it
(issue 10). What must still hold: nobody borrows the connection before its reset is done,
a block that raised is released (and rolled back) before the error reaches the caller, and
closing the pool waits for every release still under way. The reset here waits for the
test's word, so each ordering is checked by events, not by timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from conftest_pg import require_postgres
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings

pytestmark = pytest.mark.postgres


class HeldReset(asyncpg.Connection):
    """A connection whose reset on release waits until the test lets it go."""

    gate: asyncio.Event
    resets: list[int]

    async def reset(self, *, timeout: float | None = None) -> None:
        await HeldReset.gate.wait()
        HeldReset.resets.append(id(self))
        await super().reset(timeout=timeout)


@pytest.fixture
async def held() -> AsyncIterator[type[HeldReset]]:
    await require_postgres()
    HeldReset.gate, HeldReset.resets = asyncio.Event(), []
    # A pool that waited for the reset before answering would hang on the gate: opened late
    # all the same, so such a pool fails the test (its 10 s waits run out) instead of hanging it.
    opener = asyncio.get_running_loop().call_later(15, HeldReset.gate.set)
    yield HeldReset
    opener.cancel()


async def test_a_statement_answers_before_its_connection_is_reset(held) -> None:
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=1, connection_class=held) as pool:
        # Would never return if the answer waited for the reset the gate holds.
        answer = await asyncio.wait_for(pool.system_statement(lambda conn: conn.fetchval("SELECT 41 + 1")), 10)
        assert answer == 42 and held.resets == []
        # The only connection is still being reset: the next borrower waits for it.
        async def after_the_reset(conn: asyncpg.Connection) -> int:
            return len(held.resets)

        second = asyncio.create_task(pool.system_statement(after_the_reset))
        await asyncio.sleep(0.2)
        assert not second.done()
        held.gate.set()
        assert await asyncio.wait_for(second, 10) == 1  # it ran once the first reset was done


async def test_closing_the_pool_waits_for_a_release_under_way(held) -> None:
    pool = TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=1, connection_class=held)
    async with pool:
        await asyncio.wait_for(pool.system_statement(lambda conn: conn.fetchval("SELECT 1")), 10)
        closing = asyncio.create_task(pool.__aexit__(None, None, None))
        await asyncio.sleep(0.2)
        assert not closing.done() and held.resets == []
        held.gate.set()
        await asyncio.wait_for(closing, 10)
        assert len(held.resets) == 1


async def test_a_block_that_raised_is_rolled_back_and_released_before_the_error_arrives(held) -> None:
    held.gate.set()
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=1, connection_class=held) as pool:
        with pytest.raises(RuntimeError, match="the block failed"):
            async with pool.system_transaction() as conn:
                await conn.execute("SET LOCAL application_name = 'inside-the-failed-block'")
                raise RuntimeError("the block failed")
        assert len(held.resets) == 1  # released (reset) before the error got here
        # The one connection is free at once and carries nothing of the failed transaction.
        name = await asyncio.wait_for(pool.system_statement(
            lambda conn: conn.fetchval("SELECT current_setting('application_name')")), 10)
        assert name != "inside-the-failed-block"


async def test_a_hundred_statements_on_one_connection_each_get_it_back(held) -> None:
    held.gate.set()
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=1, connection_class=held) as pool:
        answers = [await asyncio.wait_for(pool.system_statement(lambda conn, n=n: conn.fetchval("SELECT $1::int", n)),
                                          10) for n in range(100)]
        assert answers == list(range(100))
    assert len(held.resets) == 100
