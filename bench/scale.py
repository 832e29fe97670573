"""Scale: the whole loop with every service on this machine, at growing session counts;
runner throughput with 1, 2 and 4 runners on sleep-bound tools; brain memory per idle session
(from the whole loop's brain, which holds every session it ran until idle eviction).

Each figure starts its own processes (`tests.e2e.stack.Stack`: one brain, runners, the
archiver) on the running broker and database, so the services' CPU can be read from
`/proc` per process. Sessions are created by producing `create_session` commands straight
onto the inbox, as any Kafka client may; timings come from the brain's own `ts` stamps.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

from bench import step_cost
from bench.harness import ROUND_TRIPS, UNLIMITED_QUOTAS, archive_caught_up, log_since, service, summary
from bench.process_cpu import cpu_s, tree_cpu_s
from tests.e2e.stack import Stack
from wakeline.contract.commands import CreateSession
from wakeline.transport.kafka_io import make_producer
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import INBOX, partition_for, record_key

POLICIES = Path(__file__).resolve().parent / "policies"
def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def create_sessions(count: int, policy: str, tenant: str = "default") -> list[str]:
    settings = CommonSettings()
    ids = [str(uuid.uuid4()) for _ in range(count)]
    producer = make_producer(settings)
    await producer.start()
    try:
        sent = [await producer.send(
            INBOX, CreateSession(command_id=str(uuid.uuid4()), session_id=sid, tenant=tenant, actor="user:bench",
                                 message="bench", config={"model": f"scripted:{policy}", "max_turns": 100}
                                 ).model_dump_json().encode(),
            key=record_key(sid), partition=partition_for(sid, settings.partitions)) for sid in ids]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()
    return ids


async def wait_ended(ids: list[str], timeout_s: float) -> None:
    conn = await service()
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            async with conn.transaction():
                await conn.execute("SELECT set_config('wakeline.tenant', 'default', true)")
                # The sessions row moves in the transaction that stores the session_ended event:
                # one key per id, where the same count over events probes every month's
                # partition: 2-3 ms a poll at 500 ids, against 10-25 ms, four times a second,
                # taken from the cores the loop is measured on.
                ended = await conn.fetchval("SELECT count(*) FROM sessions WHERE session_id = ANY($1) "
                                            "AND status = 'ended'", ids)
            if ended >= len(ids):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{ended} of {len(ids)} sessions ended within {timeout_s:g} s")
            await asyncio.sleep(0.25)
    finally:
        await conn.close()


async def log_figures(ids: list[str], since: datetime) -> dict:
    """From the stored log: events, first → last event time, tool round trips."""
    conn = await service()
    try:
        async with conn.transaction():
            await conn.execute("SELECT set_config('wakeline.tenant', 'default', true)")
            span = await conn.fetchrow("SELECT count(*) AS events, min(ts) AS first, max(ts) AS last FROM events "
                                       "WHERE session_id = ANY($1)", ids)
            trips = await conn.fetch(ROUND_TRIPS, ids, since)
    finally:
        await conn.close()
    seconds = (span["last"] - span["first"]).total_seconds()
    millis = [(r["answered"] - r["called"]).total_seconds() * 1000 for r in trips]
    return {"events": span["events"], "log_span_s": round(seconds, 2),
            "events_per_s": round(span["events"] / seconds, 1) if seconds else None,
            "tool_round_trip_ms": summary(millis) if millis else None}


def start(stack: Stack, name: str, kind: str | None = None, **env: str) -> int:
    # The whole loop at 500 and 1,000 sessions of one tenant measures the loop, not the quotas
    # (the running-sessions default of 100 would queue most of them): unlimited here.
    service_ = stack.start(name, kind, WAKELINE_POLICY_DIR=str(POLICIES), WAKELINE_IDLE_EVICT_S="600",
                           **UNLIMITED_QUOTAS, **env)
    assert service_.proc is not None
    return service_.proc.pid


async def whole_loop(counts: tuple[int, ...], timeout_s: float = 900) -> list[dict]:
    """One brain, one runner, the archiver: N concurrent sessions of ten no-op tool calls each."""
    stack = Stack(Path(tempfile.mkdtemp(prefix="wakeline-scale-")))
    pids = {name: start(stack, name) for name in ("archiver", "runner", "brain")}
    lines = []
    try:
        await asyncio.sleep(8)  # group joins and partition assignment, before the clock starts
        caught_up = await archive_caught_up()  # and the archiver past what earlier figures left on the topic
        for count in counts:
            async with step_cost.window() as measured:  # every process on the path, the broker's and Postgres's too
                before = {name: cpu_s(pid) for name, pid in pids.items()}
                started, since = time.monotonic(), log_since()
                ids = await create_sessions(count, "noop10")
                await wait_ended(ids, timeout_s)
                complete_s = time.monotonic() - started
                used = {name: cpu_s(pid) - before[name] for name, pid in pids.items()}
            figures = await log_figures(ids, since)
            lines.append({"bench": "scale_whole_loop", "sessions": count, "complete_s": round(complete_s, 2),
                          **figures,
                          "cpu_ms_per_event": {n: round(s * 1000 / figures["events"], 3) for n, s in used.items()},
                          "brain_rss_mb": round(rss_kb(pids["brain"]) / 1024, 1),
                          "cost": measured.figures(figures["tool_round_trip_ms"]["n"], figures["events"]),
                          **({} if lines else {"archive_caught_up": caught_up})})
    finally:
        stack.stop_all()
    return lines


def idle_memory(lines: list[dict]) -> dict:
    """Brain RSS growth per session held idle, from `whole_loop`'s lines: every ended session
    stays in the brain until idle eviction (600 s here), so the growth after the first
    (warm-up) size over the sessions added since is the cost of one held session."""
    first, last = lines[0], lines[-1]
    held = sum(line["sessions"] for line in lines[1:])
    return {"bench": "brain_idle_session_kb", "sessions": held, "rss_after_warm_up_mb": first["brain_rss_mb"],
            "rss_after_mb": last["brain_rss_mb"],
            "kb_per_session": round((last["brain_rss_mb"] - first["brain_rss_mb"]) * 1024 / held, 1) if held else None}


async def runner_scaling(runners: tuple[int, ...] = (1, 2, 4), sessions: int = 48,
                         timeout_s: float = 600, windows: dict[int, tuple[float, float]] | None = None,
                         runner_env: dict[str, str] | None = None,
                         cpu: dict[int, dict[str, float]] | None = None) -> dict:
    """Sessions of five 0.2 s `sleep` calls, with 1, 2, 4 runners in the group: calls per second.

    `windows`, if given, receives each count's timed part as (start, end) in `time.monotonic()`;
    `cpu` receives each count's CPU seconds per service over it (with their descendants: a
    runner's calls, supervisors and tools included; the runners summed);
    `runner_env` is added to the runners' environment (another code tree on PYTHONPATH).
    """
    rates = {}
    for count in runners:
        stack = Stack(Path(tempfile.mkdtemp(prefix=f"wakeline-runners{count}-")))
        try:
            pids = {name: start(stack, name) for name in ("archiver", "brain")}
            for index in range(count):
                pids[f"runner-{index}"] = start(stack, f"runner-{index}", "runner", **(runner_env or {}))
            await asyncio.sleep(10)  # every runner in the group before the clock starts
            await archive_caught_up()
            before = {name: tree_cpu_s(pid) for name, pid in pids.items()}
            started = time.monotonic()
            ids = await create_sessions(sessions, "sleep5")
            await wait_ended(ids, timeout_s)
            ended = time.monotonic()
            used = {name: tree_cpu_s(pid) - before[name] for name, pid in pids.items()}
            rates[count] = round(sessions * 5 / (ended - started), 2)
            if windows is not None:
                windows[count] = (started, ended)
            if cpu is not None:
                cpu[count] = {"brain": used["brain"], "archiver": used["archiver"],
                              "runners": sum(v for n, v in used.items() if n.startswith("runner-"))}
        finally:
            stack.stop_all()
    first = rates[runners[0]]
    return {"bench": "runner_scaling", "sessions": sessions, "calls_per_s": rates,
            "ratio_to_one": {n: round(r / first, 2) for n, r in rates.items()}}


async def run(counts: tuple[int, ...] = (10, 100, 500, 1000)) -> list[dict]:
    loop = await whole_loop(counts)
    return [*loop, idle_memory(loop), await runner_scaling()]


if __name__ == "__main__":
    for line in asyncio.run(run()):
        print(json.dumps(line), flush=True)
