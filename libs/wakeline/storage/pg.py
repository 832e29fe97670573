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

from wakeline.runtime.fair_slots import FairSlots

T = TypeVar("T")
log = logging.getLogger(__name__)


class TenantPool:
    """An asyncpg pool whose connections are only handed out inside a transaction, or for
    one statement that needs no tenant (`system_statement`).

    `async with TenantPool(dsn) as pool:` opens the pool; nothing connects before that.

    `fair`: the connections go round robin across the tenants waiting for one (`FairSlots`),
    not in arrival order. asyncpg hands them out first come, first served, so in a service
    whose pool serves every tenant's sessions (the brain) one tenant's burst of wakes and
    slot takes made another tenant's next statement wait behind all of them (issue 34: a
    steady tenant's turns waited 83 ms on average for the brain's 4 connections while another
    tenant's 300 new sessions woke, against 6-7 ms quiet; docs/benchmarks.md). Work for no
    tenant in particular waits in a turn of its own.
    """

    def __init__(self, dsn: str, application_name: str | None = None, *, fair: bool = False,
                 **pool_options: Any) -> None:
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
        # as many turns as the pool has connections (asyncpg's default size is 10)
        self._fair = FairSlots(pool_options.get("max_size", 10)) if fair else None
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
        async with self._acquire(tenant) as conn, conn.transaction():
            await conn.execute("SELECT set_config('wakeline.tenant', $1, true), "
                               "set_config('wakeline.viewer', $2, true)", tenant, viewer or "")
            yield conn

    @asynccontextmanager
    async def system_transaction(self, for_tenant: str | None = None) -> AsyncIterator[asyncpg.Connection]:
        """A transaction with no tenant: for archiver offsets and dead letters.

        Tenant tables are still protected: with no tenant set they show no rows and
        accept no inserts. `for_tenant`: whose work it is, for a `fair` pool's turns only
        (it sets nothing in the transaction).
        """
        async with self._acquire(for_tenant) as conn, conn.transaction():
            yield conn

    async def system_statement(self, run: Callable[..., Awaitable[T]], *args: Any,
                               for_tenant: str | None = None) -> T:
        """`run(conn, *args)` on a connection outside any transaction, with no tenant.

        For one read-only statement with no tenant (an API key lookup), or one that scopes
        itself (a function that sets the tenant transaction-locally, like `session_row`):
        alone, a statement is its own transaction, and the BEGIN and COMMIT round trips are
        saved. `run` must issue exactly one statement; anything more belongs in
        `system_transaction`. `for_tenant`: whose work it is, as in `system_transaction`.
        """
        async with self._acquire(for_tenant) as conn:
            return await run(conn, *args)

    @asynccontextmanager
    async def _acquire(self, tenant: str | None = None) -> AsyncIterator[asyncpg.Connection]:
        if self._pool is None:
            raise RuntimeError("TenantPool is not open; use `async with TenantPool(dsn)`")
        pool, turn = self._pool, tenant or ""
        if self._fair is not None:
            await self._fair.acquire(turn)  # held until the connection is back in the pool
        try:
            conn = await pool.acquire()
        except BaseException:
            self._give_turn_back(turn)
            raise
        try:
            yield conn
        except BaseException:
            try:
                await pool.release(conn)
            finally:
                self._give_turn_back(turn)
            raise
        # A block that ended normally has its answer (a transaction has committed): the
        # connection's reset, one more round trip, need not stand between the caller and its
        # next step (issue 10: a command's key read waited 0.2-0.5 ms for it). The connection
        # goes back to the pool only once the reset is done, so no borrower sees it earlier.
        release = asyncio.ensure_future(pool.release(conn))
        self._releasing.add(release)
        release.add_done_callback(lambda done: self._released(done, turn))

    def _give_turn_back(self, turn: str) -> None:
        if self._fair is not None:
            self._fair.release(turn)

    def _released(self, release: asyncio.Future[None], turn: str) -> None:
        self._releasing.discard(release)
        self._give_turn_back(turn)
        if not release.cancelled() and release.exception() is not None:
            log.warning("a pooled Postgres connection failed its reset on release: %r", release.exception())
