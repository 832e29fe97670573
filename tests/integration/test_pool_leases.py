"""The tool-call pool's leases on the real Postgres: workers that search at once.

Each worker looks at the calls on offer in an order of its own (`pool.SPREAD`), so two
workers try the same calls in different orders. Taken in one transaction, a worker held
every lease it had taken (and every row its upsert met) while it waited for the next:
two workers waiting on each other's rows was a deadlock, Postgres aborted one, and its
worker's stream died mid-response (CI, stop 48: a pool test's worker dropped after four
calls); a take that met another worker's renewal could do the same. These tests run many
workers at once on one tenant's calls, and count what Postgres aborted: nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from conftest_pg import fresh_tenant, require_postgres
from gateway_harness import Seeder, created, draft
from tests import factories
from wakeline.runtime.settings import CommonSettings
from wakeline.storage.pg import TenantPool
from wakeline_gateway.pool import Leases

pytestmark = [pytest.mark.postgres]
SESSIONS = 48
WORKERS = 6
IN_FLIGHT = 16  # the pool stream's default: three workers' rooms overlap on 48 calls


def waiting_call(n: int) -> list:
    call_id = f"toolu_{uuid.uuid4().hex[:24]}"
    return [created(), draft("user_message", f"cmd-{uuid.uuid4()}", text=f"query {n}"),
            draft("turn_started", turn=1),
            draft("model_turn", text="", stop_reason="tool_use", tool_call_ids=[call_id]),
            draft("tool_call", name="run_query", tool_call_id=call_id, input={"sql": f"select {n}"},
                  answered_by="client")]


@pytest.fixture
async def seeded():
    await require_postgres()
    tenant = fresh_tenant()
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=WORKERS + 2) as pool:
        seeder = Seeder(pool, tenant)
        calls = set()
        for n in range(SESSIONS):
            events = await seeder.session(waiting_call(n))
            calls.add((events[0].session_id, events[-1].payload.tool_call_id))
        yield pool, tenant, calls


async def test_workers_taking_at_once_each_get_their_own_calls_and_none_fails(seeded) -> None:
    pool, tenant, calls = seeded
    leases = Leases(pool)
    taken: Counter = Counter()
    rounds = Counter()

    async def worker(name: str) -> None:
        # Take, renew, take again, as a stream's rounds do, until the pool has nothing left.
        for _ in range(6):
            offers = await leases.take(tenant, ["run_query"], name, 300.0, IN_FLIGHT)
            taken.update((o.session_id, o.tool_call_id) for o in offers)
            rounds[name] += 1
            await leases.renew(tenant, name, 300.0)

    names = [f"worker-{uuid.uuid4()}" for _ in range(WORKERS)]
    for _ in range(3):  # three rounds of every worker at once; a deadlock raises out of gather
        await asyncio.gather(*(worker(n) for n in names))
        for name in names:
            await leases.give_back(tenant, name)
        assert set(taken) == calls, len(set(taken))
        taken.clear()
    # Every worker took part in every round: the assertion above was not one worker's alone.
    assert all(rounds[n] == 18 for n in names), rounds
    # Not saved by running aborted writes again: Postgres aborted none (one lock order).
    assert leases.aborted == 0


async def test_a_call_is_leased_to_one_worker_at_a_time(seeded) -> None:
    pool, tenant, calls = seeded
    leases = Leases(pool)
    names = [f"worker-{uuid.uuid4()}" for _ in range(WORKERS)]
    held = await asyncio.gather(*(leases.take(tenant, ["run_query"], n, 300.0, IN_FLIGHT) for n in names))
    offered = Counter((o.session_id, o.tool_call_id) for offers in held for o in offers)
    assert set(offered) == calls and set(offered.values()) == {1}
    assert all(len(offers) <= IN_FLIGHT for offers in held)
    assert sum(map(len, held)) == SESSIONS
    for name, offers in zip(names, held):
        assert await leases.held(tenant, name) == len(offers)
    await asyncio.gather(*(leases.renew(tenant, n, 300.0) for n in names),
                         *(leases.take(tenant, ["run_query"], n, 300.0, IN_FLIGHT) for n in names))
    await asyncio.gather(*(leases.give_back(tenant, n) for n in names), leases.sweep(tenant))
    assert leases.aborted == 0
    assert sum([await leases.held(tenant, n) for n in names]) == 0


async def test_calls_of_sessions_created_months_ago_are_offered_beside_fresh_ones(seeded) -> None:
    # The search leaves the months before the oldest waiting session out of its plan: a call
    # made then, or made now in a session made then, is still found.
    pool, _, _ = seeded
    tenant = fresh_tenant()
    seeder, now = Seeder(pool, tenant), datetime.now(UTC)
    long_ago = now - timedelta(days=70)
    ages = {"made long ago, called then": [long_ago] * 5,
            "made long ago, called now": [long_ago] * 3 + [now] * 2,
            "made now": [now] * 5}
    expected = set()
    for times in ages.values():
        events = factories.sealed(waiting_call(0), str(uuid.uuid4()), tenant=tenant, stamps=factories.at(times))
        await seeder.insert(events, events)
        expected.add((events[0].session_id, events[-1].payload.tool_call_id))
    offers = await Leases(pool).take(tenant, ["run_query"], f"worker-{uuid.uuid4()}", 300.0, IN_FLIGHT)
    assert {(o.session_id, o.tool_call_id) for o in offers} == expected
    assert await Leases(pool).take(tenant, ["lookup"], f"worker-{uuid.uuid4()}", 300.0, IN_FLIGHT) == []
