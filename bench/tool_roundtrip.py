"""Tool round trip: the brain issues a no-op tool call → its result is sequenced.

Both ends are stamped by the brain's clock (`ts` of the `tool_call` and of its
`tool_result`), so the figure is brain → Kafka → runner → Kafka → brain → sequenced,
with no client clock involved. Brain, runner and archiver run as separate processes.
`run_against_floor` measures `bench.floors` in the same run, alternating with the round
trip, and reports each size as a ratio to its floor at p50 and p99.

`under_load` says what bounds a large figure: the same floor measured *while* that many
sessions run (how fast the broker still answers a bare round trip under this load), and
how busy the whole machine was while their calls were in flight (`/proc/stat`, both
cores). A floor that stays low while the machine is near fully busy says the round trip
waits for CPU in the services, not for Kafka.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from datetime import datetime

import asyncpg

from bench import floors, step_cost
from bench.harness import ROUND_TRIPS, log_since, service, summary
from bench.runner_cpu import BusySampler
from wakeline.contract.commands import CreateSession
from wakeline.transport.kafka_io import make_producer, send_keyed
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import INBOX


async def _ended(conn, session_ids: list[str]) -> int:
    # The sessions row, one key per id (as scale.wait_ended): the same count over events
    # probes every month's partition, on the cores the round trip is measured on.
    return await conn.fetchval("SELECT count(*) FROM sessions WHERE session_id = ANY($1) AND status = 'ended'",
                               session_ids)


async def run(sessions: int = 3, timeout_s: float = 600) -> dict:
    """The round trips of `sessions` sessions, and what they cost every process on the path
    (`bench.cost`: from their creation to the last one's end)."""
    ids, since = [str(uuid.uuid4()) for _ in range(sessions)], log_since()
    conn = await service()
    try:
        # The bench's own connection opens before the window, its backend named (off the
        # path), and the calls' times are read after the window closes: read inside it, on a
        # connection opened and closed inside it, a large log's read was most of
        # `postgres_ended` (issue 35: 3.6 ms a step at 100 sessions on 2026-12-05).
        async with step_cost.window(bench_backends={conn.get_server_pid()}) as measured:
            await create_sessions(ids)
            await wait_ended(conn, ids, timeout_s)
        times = await call_times(conn, ids, since)
    finally:
        await conn.close()
    return {"bench": "tool_round_trip_ms", "concurrent_sessions": sessions,
            **summary([(answered - called).total_seconds() * 1000 for called, answered in times]),
            "cost": measured.figures(len(times), await _events(ids))}


async def _events(ids: list[str]) -> int:
    conn = await service()
    try:
        async with conn.transaction():
            await conn.execute("SELECT set_config('wakeline.tenant', 'default', true)")
            return await conn.fetchval("SELECT count(*) FROM events WHERE session_id = ANY($1)", ids)
    finally:
        await conn.close()


async def run_against_floor(sizes: tuple[int, ...] = (3, 100), repeats: int = 2, floor_rounds: int = 20) -> list[dict]:
    """Floor and round trip alternated `repeats` times per size (noise falls on both); medians
    of the runs' p50 and p99, and the ratios. Needs brain, runner and archiver running."""
    lines = []
    for sessions in sizes:
        floor_runs, trip_runs = [], []
        for _ in range(repeats):
            floor_runs.append(await floors.run(sessions, floor_rounds))
            trip_runs.append(await run(sessions))
        lines += floor_runs + trip_runs
        floor = {q: round(statistics.median(r[q] for r in floor_runs), 3) for q in ("p50", "p99")}
        trip = {q: round(statistics.median(r[q] for r in trip_runs), 3) for q in ("p50", "p99")}
        lines.append({"bench": "tool_round_trip_vs_floor", "concurrent_sessions": sessions, "runs": repeats,
                      "floor_p50": floor["p50"], "floor_p99": floor["p99"],
                      "p50": trip["p50"], "p99": trip["p99"],
                      "p50_ratio": round(trip["p50"] / floor["p50"], 3),
                      "p99_ratio": round(trip["p99"] / floor["p99"], 3),
                      "cpu_ms_per_step": step_cost.median_per_step(r["cost"] for r in trip_runs),
                      "floor_cpu_ms_per_step": step_cost.median_per_step(r["cost"] for r in floor_runs)})
    return lines


async def under_load(sessions: int = 100, floor_sessions: int = 3, floor_rounds: int = 20,
                     settle_s: float = 2.0, timeout_s: float = 600) -> dict:
    """The round trip at `sessions` with the floor of `floor_sessions` measured during it, and
    the machine's busy share while the calls were in flight. Needs brain, runner and archiver."""
    sampler = BusySampler()
    sampler.start()
    to_monotonic = time.monotonic() - time.time()
    try:
        trip = asyncio.create_task(round_trip_times(sessions, timeout_s))
        await asyncio.sleep(settle_s)
        floor_began = time.time()
        floor = await floors.run(floor_sessions, floor_rounds)
        floor_ended = time.time()
        times = await trip
    finally:
        sampler.stopping.set()
        sampler.join()
    first = min(called for called, _ in times).timestamp()
    last = max(answered for _, answered in times).timestamp()
    busy, samples = sampler.mean_between(first + to_monotonic, last + to_monotonic)
    trip_ms = summary([(answered - called).total_seconds() * 1000 for called, answered in times])
    return {"bench": "tool_round_trip_under_load", "concurrent_sessions": sessions,
            "p50": trip_ms["p50"], "p99": trip_ms["p99"], "floor_sessions": floor_sessions,
            "floor_p50": floor["p50"], "floor_p99": floor["p99"],
            # the floor ran while calls were in flight (a short run may be over before it starts)
            "floor_within_load": first <= floor_began and floor_ended <= last,
            "machine_busy": busy if samples else None, "busy_samples": samples, "in_flight_s": round(last - first, 2)}


async def round_trips(sessions: int, timeout_s: float) -> list[float]:
    return [(answered - called).total_seconds() * 1000 for called, answered in await round_trip_times(
        sessions, timeout_s)]


async def round_trip_times(sessions: int, timeout_s: float) -> list[tuple[datetime, datetime]]:
    """(tool_call ts, tool_result ts) of every call of `sessions` new sessions of the noop policy."""
    ids, since = [str(uuid.uuid4()) for _ in range(sessions)], log_since()
    await create_sessions(ids)
    conn = await service()
    try:
        await wait_ended(conn, ids, timeout_s)
        return await call_times(conn, ids, since)
    finally:
        await conn.close()


async def create_sessions(ids: list[str]) -> None:
    """A session of the noop policy for each id, straight onto the inbox."""
    settings = CommonSettings()
    producer = make_producer(settings)
    await producer.start()
    try:
        for sid in ids:
            command = CreateSession(command_id=str(uuid.uuid4()), session_id=sid, actor="user:bench",
                                    message="bench", config={"model": "scripted:noop", "max_turns": 100})
            await send_keyed(producer, INBOX, sid, command, settings.partitions)
    finally:
        await producer.stop()


async def wait_ended(conn: asyncpg.Connection, ids: list[str], timeout_s: float) -> None:
    async with conn.transaction():
        await conn.execute("SELECT set_config('wakeline.tenant', 'default', true)")
        deadline = time.monotonic() + timeout_s
        while await _ended(conn, ids) < len(ids):
            if time.monotonic() > deadline:
                raise RuntimeError("sessions did not end in time; is the stack running?")
            await asyncio.sleep(0.2)


async def call_times(conn: asyncpg.Connection, ids: list[str], since: datetime) -> list[tuple[datetime, datetime]]:
    async with conn.transaction():
        await conn.execute("SELECT set_config('wakeline.tenant', 'default', true)")
        rows = await conn.fetch(ROUND_TRIPS, ids, since)
    return [(r["called"], r["answered"]) for r in rows]


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run())))
