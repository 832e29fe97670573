"""The pool's lease writes when Postgres aborts one (a deadlock, a serialization failure):
run again, a few times, never given up on at the first (tests/integration/test_pool_leases.py
runs workers at once on the real Postgres)."""

from __future__ import annotations

from contextlib import asynccontextmanager

import asyncpg
import pytest

from wakeline_gateway import pool as pool_module
from wakeline_gateway.pool import ATTEMPTS, GIVE_BACK, Leases, pool_frames


class AbortingPool:
    """A TenantPool whose first `aborts` statements fail as Postgres fails a deadlock's victim."""

    def __init__(self, aborts: int, error: type[Exception] = asyncpg.DeadlockDetectedError):
        self.aborts, self.error, self.statements, self.tenants = aborts, error, [], []

    @asynccontextmanager
    async def transaction(self, tenant: str):
        self.tenants.append(tenant)
        yield self

    async def fetch(self, sql: str, *args):
        self.statements.append((sql, args))
        if self.aborts:
            self.aborts -= 1
            raise self.error("deadlock detected")
        return []


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    async def instantly(_: float) -> None:
        return None
    monkeypatch.setattr(pool_module.asyncio, "sleep", instantly)


@pytest.mark.parametrize("error", [asyncpg.DeadlockDetectedError, asyncpg.SerializationError])
async def test_an_aborted_lease_write_is_run_again_until_it_commits(error) -> None:
    pool = AbortingPool(ATTEMPTS - 1, error)
    leases = Leases(pool)
    await leases.give_back("acme", "worker-1")
    assert leases.aborted == ATTEMPTS - 1
    assert pool.statements == [(GIVE_BACK, ("acme", "worker-1"))] * ATTEMPTS
    assert pool.tenants == ["acme"] * ATTEMPTS  # each attempt a transaction of its own, the tenant's


async def test_a_write_aborted_every_time_fails_after_its_attempts() -> None:
    pool = AbortingPool(ATTEMPTS)
    with pytest.raises(asyncpg.DeadlockDetectedError):
        await Leases(pool).renew("acme", "worker-1", 30.0)
    assert len(pool.statements) == ATTEMPTS


async def test_other_errors_are_not_run_again() -> None:
    pool = AbortingPool(1, asyncpg.UniqueViolationError)
    with pytest.raises(asyncpg.UniqueViolationError):
        await Leases(pool).answered("acme", "s-1", "toolu_1")
    assert len(pool.statements) == 1


async def test_a_stream_outlives_a_sweep_postgres_aborted() -> None:
    class Quiet(Leases):
        takes = 0

        async def take(self, *args, **kwargs):
            self.takes += 1
            return []

    pool = AbortingPool(1)  # the stream's first write, the sweep, is a deadlock's victim once
    leases = Quiet(pool)
    gone_after = iter([False, True])

    async def gone() -> bool:
        return next(gone_after)

    frames = [f async for f in pool_frames(leases, "acme", ["run_query"], 30.0, 0.0, 60.0, 4, gone)]
    assert frames == [": wakeline tool-call pool\n\n"]
    assert leases.takes == 2  # two rounds, then the worker was gone
    assert pool.statements[-1][0] == GIVE_BACK
