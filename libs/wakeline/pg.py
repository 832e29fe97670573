"""Postgres connections scoped to a tenant: the one way services talk to the database.

Row-level security on events, event_keys and sessions compares each row's tenant with
the `wakeline.tenant` setting, so every tenant-data transaction must set it first. It is
set with `set_config(..., true)`, i.e. local to the transaction: when the transaction
ends the setting is gone, and the next borrower of the pooled connection starts with no
tenant (and sees no rows) rather than the previous caller's. Queries themselves live
with their callers (archiver, gateway, brain), not here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg

T = TypeVar("T")


class TenantPool:
    """An asyncpg pool whose connections are only handed out inside a transaction.

    `async with TenantPool(dsn) as pool:` opens the pool; nothing connects before that.
    """

    def __init__(self, dsn: str, **pool_options: Any) -> None:
        self._dsn = dsn
        self._pool_options = {"reset": _no_reset_query, **pool_options}
        self._pool: asyncpg.Pool | None = None

    async def __aenter__(self) -> TenantPool:
        self._pool = await asyncpg.create_pool(self._dsn, **self._pool_options)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    @asynccontextmanager
    async def transaction(self, tenant: str, viewer: str | None = None) -> AsyncIterator[asyncpg.Connection]:
        """A connection in a transaction that sees and writes only `tenant`'s rows.

        With `viewer` (an owner such as "user:alice"), reads of sessions and events are
        further restricted to sessions that owner holds (migration 0006's viewer_owns).
        Commits when the block ends normally, rolls back when it raises.
        """
        if not tenant:
            raise ValueError("tenant must be a non-empty string")
        async with self._acquire() as conn, conn.transaction():
            await conn.execute("SELECT set_config('wakeline.tenant', $1, true), "
                               "set_config('wakeline.viewer', $2, true)", tenant, viewer or "")
            yield conn

    @asynccontextmanager
    async def system_transaction(self) -> AsyncIterator[asyncpg.Connection]:
        """A transaction with no tenant: for archiver offsets and dead letters.

        Tenant tables are still protected: with no tenant set they show no rows and
        accept no inserts.
        """
        async with self._acquire() as conn, conn.transaction():
            yield conn

    async def system_statement(self, run: Callable[..., Awaitable[T]], *args: Any) -> T:
        """`run(conn, *args)` on a connection outside any transaction, with no tenant.

        For one read-only statement with no tenant (an API key lookup): alone, a statement
        is its own transaction, and the BEGIN and COMMIT round trips are saved. `run` must
        issue exactly one statement; anything more belongs in `system_transaction`.
        """
        async with self._acquire() as conn:
            return await run(conn, *args)

    @asynccontextmanager
    async def _acquire(self) -> AsyncIterator[asyncpg.Connection]:
        if self._pool is None:
            raise RuntimeError("TenantPool is not open; use `async with TenantPool(dsn)`")
        async with self._pool.acquire() as conn:
            yield conn


async def _no_reset_query(conn: asyncpg.Connection) -> None:
    """Released connections skip asyncpg's reset query.

    By default asyncpg runs `pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL` on
    every release: a round trip (~0.3 ms here) per transaction. Borrowers of this pool hold a
    connection only inside one managed transaction whose settings are transaction-local
    (`set_config(..., true)`), and none takes session locks, listens or sets session state,
    so there is nothing for it to undo. A transaction that did not end is still rolled back:
    asyncpg does that before calling a custom reset.
    """
