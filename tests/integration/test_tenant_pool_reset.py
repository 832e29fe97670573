"""A TenantPool connection goes back to the pool without asyncpg's reset statements after a
block that ended cleanly, and with them after one that raised (`PooledConnection`, issue 35).

What Postgres last ran on the pooled backend (pg_stat_activity.query, read from another
connection once the release is done) says which: `COMMIT`, or the reset statements. What
borrowers set stays local to their transaction either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from conftest_pg import connected, fresh_tenant, require_postgres
from wakeline.runtime.settings import CommonSettings
from wakeline.storage.pg import PooledConnection, TenantPool

pytestmark = pytest.mark.postgres
RESET_STATEMENTS = ("pg_advisory_unlock_all", "CLOSE ALL", "UNLISTEN", "RESET ALL")


class ObservedRelease(PooledConnection):
    """Says when its release is done, so the test reads the backend after it, not during."""

    released: asyncio.Event

    async def reset(self, *, timeout: float | None = None) -> None:
        await super().reset(timeout=timeout)
        ObservedRelease.released.set()


@pytest.fixture
async def pool() -> AsyncIterator[TenantPool]:
    await require_postgres()
    ObservedRelease.released = asyncio.Event()
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=1,
                          connection_class=ObservedRelease) as opened:
        yield opened


async def last_statement_after_release(observer: asyncpg.Connection, pid: int) -> str:
    await asyncio.wait_for(ObservedRelease.released.wait(), 10)
    ObservedRelease.released.clear()
    return str(await observer.fetchval("SELECT query FROM pg_stat_activity WHERE pid = $1", pid))


async def test_a_transaction_that_committed_is_released_without_the_reset_statements(pool: TenantPool) -> None:
    async with connected(CommonSettings().postgres_dsn) as observer:
        async with pool.transaction(fresh_tenant()) as conn:
            pid = await conn.fetchval("SELECT pg_backend_pid()")
        last = await last_statement_after_release(observer, pid)
    assert last.strip().upper().rstrip(";") == "COMMIT", last


async def test_a_block_that_raised_is_released_with_the_reset_statements(pool: TenantPool) -> None:
    async with connected(CommonSettings().postgres_dsn) as observer:
        with pytest.raises(RuntimeError):
            async with pool.transaction(fresh_tenant()) as conn:
                pid = await conn.fetchval("SELECT pg_backend_pid()")
                raise RuntimeError("the block failed")
        last = await last_statement_after_release(observer, pid)
        assert all(statement in last for statement in RESET_STATEMENTS), last
        # and the next clean block goes back to skipping them
        async with pool.system_transaction() as conn:
            assert await conn.fetchval("SELECT pg_backend_pid()") == pid
        assert "RESET ALL" not in await last_statement_after_release(observer, pid)


async def test_what_a_borrower_sets_locally_is_gone_for_the_next_without_a_reset(pool: TenantPool) -> None:
    tenant = fresh_tenant()
    async with pool.transaction(tenant, viewer="user:alice") as conn:
        await conn.execute("SET LOCAL statement_timeout = '1234s'")
        pid = await conn.fetchval("SELECT pg_backend_pid()")
    async with pool.system_transaction() as conn:
        assert await conn.fetchval("SELECT pg_backend_pid()") == pid  # the same connection, not reset
        seen = await conn.fetchrow("SELECT current_setting('statement_timeout') AS timeout,"
                                   " current_setting('wakeline.tenant', true) AS tenant,"
                                   " current_setting('wakeline.viewer', true) AS viewer")
    assert seen["timeout"] != "1234s" and not seen["tenant"] and not seen["viewer"], dict(seen)


def test_a_pool_refuses_a_connection_class_that_would_reset_every_release() -> None:
    with pytest.raises(TypeError, match="PooledConnection"):
        TenantPool("postgresql://unused", connection_class=asyncpg.Connection)
