"""Declared tools: the client round trip beside the runner's, and the pool's throughput.

Client round trip: the brain seals a declared tool's call → the gateway's harness stream
carries it → the harness posts the result → the brain seals the result. Both ends are the
brain's `ts` (as the runner's round trip in `tool_roundtrip`), so no client clock is
involved; the harness answers at once (a tool that takes no time). Runner and client
round trips are measured in turns, at the same sizes, in the same run, and reported as
a ratio (`p50_ratio`, `p99_ratio`: client over runner).

Pool: `sessions` sessions of five declared-tool calls each, answered by 1, 2 and 4 pool
workers (`GET /v1/tool-calls/stream`, a tenant of their own per figure, each worker
answering up to its in-flight bound at once): calls answered per second, from the first
call's `ts` to the last result's.

Needs brain, runner and archiver running with the bench policies (`bench/__main__.py`);
starts its own gateway.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench import tool_roundtrip
from bench.harness import ROUND_TRIPS, log_since, service, summary
from tests.e2e.stack import Stack

ECHO = {"name": "echo", "description": "Echo the text back.",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}


async def _frames(response: httpx.Response):
    """(event, data) of each SSE frame."""
    event, data = "message", []
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


async def _harness(shared: httpx.AsyncClient, session_id: str) -> datetime:
    """One session's harness: answers every call at once until the session ends; returns when
    its stream was open. A client of its own, as each harness process has: in one shared pool
    of 100+ open streams, httpcore scans every connection on each request, and that scan was
    70% of this process's CPU."""
    async with httpx.AsyncClient(base_url=shared.base_url, headers=shared.headers, timeout=60) as client, \
            client.stream("GET", f"/v1/sessions/{session_id}/tool-calls/stream") as response:
        response.raise_for_status()
        connected = datetime.now(UTC)
        async for event, body in _frames(response):
            if event == "session_ended":
                return connected
            if event == "tool_call":
                answered = await client.post(f"/v1/sessions/{session_id}/tool-results/{body['tool_call_id']}",
                                             json={"output": body["input"]["text"]})
                answered.raise_for_status()
    raise RuntimeError(f"the stream of {session_id} ended before the session did")


async def _create(client: httpx.AsyncClient, policy: str) -> str:
    created = await client.post("/v1/sessions", json={"message": "bench", "config": {
        "model": f"scripted:{policy}", "tools": [ECHO], "max_turns": 100}})
    created.raise_for_status()
    return created.json()["session_id"]


async def _call_times(ids: list[str], since: datetime, tenant: str = "default",
                      with_session: bool = False) -> list[tuple]:
    conn = await service()
    try:
        async with conn.transaction():
            await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", tenant)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 600
            while await conn.fetchval("SELECT count(*) FROM sessions WHERE session_id = ANY($1) "
                                      "AND status = 'ended'", ids) < len(ids):
                if loop.time() > deadline:
                    raise RuntimeError("sessions did not end in time")
                await asyncio.sleep(0.2)
        async with conn.transaction():
            await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", tenant)
            rows = await conn.fetch(ROUND_TRIPS.replace("SELECT ", "SELECT c.session_id, ", 1), ids, since)
            return [(r["session_id"], r["called"], r["answered"]) if with_session else (r["called"], r["answered"])
                    for r in rows]
    finally:
        await conn.close()


async def client_round_trips(client: httpx.AsyncClient, sessions: int) -> tuple[list[float], int]:
    """(round trips in ms, calls left out). Each session's harness connects as soon as its
    session exists (all are created at once, as the runner's figure puts its sessions on the
    inbox at once). A call sealed before its harness's stream was open (the first, mostly)
    is left out: it would time the harness's absence, not the round trip."""
    since = log_since()

    async def one() -> tuple[str, datetime]:
        sid = await _create(client, "noop_client")
        return sid, await _harness(client, sid)
    connected = dict(await asyncio.gather(*(one() for _ in range(sessions))))
    times = await _call_times(list(connected), since, with_session=True)
    kept = [(answered - called).total_seconds() * 1000 for sid, called, answered in times if called > connected[sid]]
    return kept, len(times) - len(kept)


async def round_trip_vs_runner(client: httpx.AsyncClient, sizes: tuple[int, ...], repeats: int) -> list[dict]:
    lines = []
    for sessions in sizes:
        runner_runs, client_runs, left_out = [], [], 0
        for _ in range(repeats):
            runner_runs.append(summary(await tool_roundtrip.round_trips(sessions, 600)))
            trips, before_connect = await client_round_trips(client, sessions)
            client_runs.append(summary(trips))
            left_out += before_connect
        runner = {q: statistics.median(r[q] for r in runner_runs) for q in ("p50", "p99")}
        harness = {q: statistics.median(r[q] for r in client_runs) for q in ("p50", "p99")}
        lines.append({"bench": "client_round_trip_vs_runner", "concurrent_sessions": sessions, "runs": repeats,
                      "runner_p50": runner["p50"], "runner_p99": runner["p99"],
                      "p50": harness["p50"], "p99": harness["p99"], "calls": client_runs[0]["n"],
                      "left_out_before_connect": left_out,
                      "p50_ratio": round(harness["p50"] / runner["p50"], 3),
                      "p99_ratio": round(harness["p99"] / runner["p99"], 3)})
    return lines


async def _worker(base_url: str, key: str, stop: asyncio.Event) -> int:
    answered = 0
    limits = httpx.Limits(max_connections=40)
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60,
                                 limits=limits) as client:
        async def answer(call: dict) -> None:
            nonlocal answered
            url = f"/v1/sessions/{call['session_id']}/tool-results/{call['tool_call_id']}"
            (await client.post(url, json={"output": call["input"]["text"]})).raise_for_status()
            answered += 1
        tasks: set[asyncio.Task] = set()
        async with client.stream("GET", "/v1/tool-calls/stream", params={"tools": "echo"}) as response:
            response.raise_for_status()
            async for event, call in _frames(response):
                if event == "tool_call":
                    task = asyncio.create_task(answer(call))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                if stop.is_set():
                    break
        await asyncio.gather(*tasks)
    return answered


async def pool_throughput(stack: Stack, workers: int, sessions: int) -> dict:
    tenant, since = f"bench-pool-{uuid.uuid4().hex[:8]}", log_since()
    user = {"Authorization": f"Bearer {stack.api_key('bench', 'user', tenant=tenant)}"}
    service_key = stack.api_key("pool", "service", tenant=tenant)
    stop = asyncio.Event()
    running = [asyncio.create_task(_worker(stack.url, service_key, stop)) for _ in range(workers)]
    # All at once: created one after another (each waits for its archived row), the creations
    # spread over ~8 s at 100 sessions and bounded the figure, whatever the workers did.
    async with httpx.AsyncClient(base_url=stack.url, headers=user, timeout=60,
                                 limits=httpx.Limits(max_connections=sessions + 10)) as client:
        ids = list(await asyncio.gather(*(_create(client, "pool_client") for _ in range(sessions))))
    times = await _call_times(ids, since, tenant)
    stop.set()
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    first = min(called for called, _ in times)
    last = max(answered for _, answered in times)
    span = (last - first).total_seconds()
    return {"bench": "pool_throughput", "workers": workers, "sessions": sessions, "calls": len(times),
            "span_s": round(span, 2), "calls_per_s": round(len(times) / span, 1)}


async def run(sizes: tuple[int, ...] = (1, 100), repeats: int = 2, pool_sessions: int = 100,
              pool_workers: tuple[int, ...] = (1, 2, 4), run_dir: Path | None = None) -> list[dict]:
    stack = Stack(run_dir or Path(tempfile.mkdtemp(prefix="wakeline-bench-harness-")))
    try:
        stack.start("gateway-harness", kind="gateway")
        stack.wait_gateway()
        headers = {"Authorization": f"Bearer {stack.api_key('bench', 'user')}"}
        limits = httpx.Limits(max_connections=max(sizes) * 2 + 20)
        async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60, limits=limits) as client:
            lines = await round_trip_vs_runner(client, sizes, repeats)
        for workers in pool_workers:
            lines.append(await pool_throughput(stack, workers, pool_sessions))
        return lines
    finally:
        stack.stop_all()


def main() -> None:
    """`python -m bench.client_tools`: this section alone, with its own brain, runner and
    archiver (`make bench` runs it beside the others with theirs)."""
    policies = Path(__file__).resolve().parent / "policies"
    services = Stack(Path(tempfile.mkdtemp(prefix="wakeline-bench-client-tools-")))
    started = time.monotonic()
    try:
        for name in ("archiver", "runner", "brain"):
            services.start(name, WAKELINE_POLICY_DIR=str(policies))
        for line in asyncio.run(_warmed(run())):
            print(json.dumps(line), flush=True)
    finally:
        services.stop_all()
    print(json.dumps({"bench": "section_s", "section": "client_tools", "s": round(time.monotonic() - started, 1)}))


async def _warmed(measured):
    """One runner round trip first: the services' group memberships settle before timing."""
    await tool_roundtrip.round_trips(1, 600)
    return await measured


if __name__ == "__main__":
    main()
