"""What one pool worker's search costs: `Leases.take` with nothing waiting, and with calls waiting.

    python -m bench.pool_take [WAITING] [ROUNDS]

Every worker connected to `GET /v1/tool-calls/stream` runs a take every `tool_call_poll_s`
(0.1 s) while it has room, whether anything waits or not, so a take's time is, ten times a
second, each connected worker's cost in Postgres. This seeds a fresh tenant with WAITING
sessions each waiting on one declared tool's call (archived as the archiver stores them),
then times, ROUNDS times, a new worker's take of up to 16 of them (the stream's default
`max_in_flight`) and its give-back; and the same for a fresh tenant where nothing waits.
Needs only Postgres. An A/B against older code: the same command with the old tree first on
`PYTHONPATH` (docs/benchmarks.md says how), alternated.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid

from tests import factories
from tests.factories import LIVE, Speakers
from wakeline.runtime.settings import CommonSettings
from wakeline.storage.pg import TenantPool
from wakeline.storage.postgres_store import PostgresEventStore
from wakeline_gateway.pool import Leases

from bench.harness import summary

IN_FLIGHT = 16
TOOL = "run_query"
draft = Speakers(user="user:bench").draft


def waiting_session(tenant: str, n: int) -> list:
    call_id = f"toolu_{uuid.uuid4().hex[:24]}"
    drafts = [draft("session_created", f"cmd-{uuid.uuid4()}", config={"model": "scripted:bench"}, owner="user:bench"),
              draft("user_message", f"cmd-{uuid.uuid4()}", text=f"query {n}"),
              draft("turn_started", turn=1),
              draft("model_turn", text="", stop_reason="tool_use", tool_call_ids=[call_id]),
              draft("tool_call", name=TOOL, tool_call_id=call_id, input={"sql": f"select {n}"}, answered_by="client")]
    return factories.sealed(drafts, str(uuid.uuid4()), tenant=tenant, stamps=LIVE)


async def takes(pool: TenantPool, waiting: int, rounds: int) -> dict:
    tenant = f"bench-pool-take-{uuid.uuid4().hex[:8]}"
    store = PostgresEventStore(pool)
    for n in range(waiting):
        await store.archive("bench-pool-take", waiting_session(tenant, n), {})
    leases, times, offered = Leases(pool), [], set()
    for _ in range(rounds):
        worker = f"worker-{uuid.uuid4()}"
        started = time.perf_counter()
        offers = await leases.take(tenant, [TOOL], worker, 300.0, IN_FLIGHT)
        times.append((time.perf_counter() - started) * 1000)
        offered.add(len(offers))
        await leases.give_back(tenant, worker)
    # Every round found what waits: a take that found nothing would be fast for the wrong reason.
    assert offered == {min(IN_FLIGHT, waiting)}, offered
    return {"bench": "pool_take_ms", "waiting": waiting, "taken": min(IN_FLIGHT, waiting), **summary(times)}


async def run(waiting: int = 48, rounds: int = 40) -> list[dict]:
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=2) as pool:
        return [await takes(pool, 0, rounds), await takes(pool, waiting, rounds)]


def main() -> None:
    waiting = int(sys.argv[1]) if len(sys.argv) > 1 else 48
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    for line in asyncio.run(run(waiting, rounds)):
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
