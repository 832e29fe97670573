"""Postgres connections scoped to a tenant: the one way services talk to the database.

Row-level security on events, event_keys and sessions compares each row's tenant with
the `wakeline.tenant` setting, so every tenant-data transaction must set it first. It is
set with `set_config(..., true)`, i.e. local to the transaction: when the transaction
ends the setting is gone, and the next borrower of the pooled connection starts with no
tenant (and sees no rows) rather than the previous caller's. Queries themselves live
with their callers (archiver, gateway, brain), not here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg

T = TypeVar("T")
log = logging.getLogger(__name__)


class TenantPool:
    """An asyncpg pool whose connections are only handed out inside a transaction, or for
    one statement that needs no tenant (`system_statement`).

    `async with TenantPool(dsn) as pool:` opens the pool; nothing connects before that.
    """

    def __init__(self, dsn: str, application_name: str | None = None, **pool_options: Any) -> None:
        self._dsn = dsn
        if application_name is not None:  # which service a backend serves, in pg_stat_activity
            pool_options["server_settings"] = {**pool_options.get("server_settings", {}),
                                               "application_name": application_name}
        # asyncpg's reset query on release (~0.3 ms a transaction) stays: it is also what
        # terminates a connection a Postgres restart broke mid-operation, instead of handing
        # it to the next borrower. Without it (tried on 2026-11-30), the archiver's next
        # transaction after a restart died on "another operation is in progress". It runs
        # after the caller has its answer, though (`_acquire`). Skipping it only after blocks
        # that ended cleanly (tried on 2026-12-06) halved Postgres's statements per tool step
        # but left the CPU per step within its noise (docs/benchmarks.md, "Where the CPU goes").
        self._pool_options = pool_options
        self._pool: asyncpg.Pool | None = None
        self._releasing: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> TenantPool:
        self._pool = await asyncpg.create_pool(self._dsn, **self._pool_options)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)
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

        For one read-only statement with no tenant (an API key lookup), or one that scopes
        itself (a function that sets the tenant transaction-locally, like `session_row`):
        alone, a statement is its own transaction, and the BEGIN and COMMIT round trips are
        saved. `run` must issue exactly one statement; anything more belongs in
        `system_transaction`.
        """
        async with self._acquire() as conn:
            return await run(conn, *args)

    @asynccontextmanager
    async def _acquire(self) -> AsyncIterator[asyncpg.Connection]:
        if self._pool is None:
            raise RuntimeError("TenantPool is not open; use `async with TenantPool(dsn)`")
        pool = self._pool
        conn = await pool.acquire()
        try:
            yield conn
        except BaseException:
            await pool.release(conn)
            raise
        # A block that ended normally has its answer (a transaction has committed): the
        # connection's reset, one more round trip, need not stand between the caller and its
        # next step (issue 10: a command's key read waited 0.2-0.5 ms for it). The connection
        # goes back to the pool only once the reset is done, so no borrower sees it earlier.
        release = asyncio.ensure_future(pool.release(conn))
        self._releasing.add(release)
        release.add_done_callback(self._released)

    def _released(self, release: asyncio.Future[None]) -> None:
        self._releasing.discard(release)
        if not release.cancelled() and release.exception() is not None:
            log.warning("a pooled Postgres connection failed its reset on release: %r", release.exception())
