"""A peer on the same machine: DBOS (the `dbos` package) running workflows of no-op durable
steps on the same Postgres server, beside our tool step at the same concurrency.

    python -m bench.dbos_peer        # ours too: starts brain, runner and archiver, two round trips at 100 sessions
    python -m bench.dbos_peer venv   # only make the peer's venv (`make venv` does)

The comparison is our tool round trip at 100 sessions (`bench.tool_roundtrip.run`: 100 sessions
of the `noop` policy, 20 tool steps each, created at once) against 100 DBOS workflows of 20
`@DBOS.step()`s started at once. Both sides are measured alike: steps over the window from
the start of the batch to seeing its end, and CPU per step from `/proc` (`bench.process_cpu`)
of every process on the path. Ours: brain, runner, archiver, the broker's JVM and Postgres;
the peer's: its one process and Postgres (the backends of its own database, the cluster's
background and what ended in the window). `machine` is every core's busy time beside it.

DBOS runs in a virtualenv of its own (`.cache/dbos-venv`, made by `make venv` or on first use,
with the pinned version), so the project's venv holds only what pyproject pins; its workload is
`bench/dbos_worker.py`. Its database (`<ours>_dbos_peer`, owned by the service role it
connects as, over TCP like our services) is made afresh per run and dropped after.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from bench import step_cost, tool_roundtrip
from bench.harness import ROOT, UNLIMITED_QUOTAS, superuser
from bench.process_cpu import Census, listening_pid, used_s
from wakeline.runtime.dsn import with_database
from tests.e2e.stack import Stack
from wakeline.runtime.settings import CommonSettings

DBOS_VERSION = "3.4.0"
# DBOS's own dependencies on the path of a step, pinned too (as resolved for 3.4.0 on 2026-12-06).
PEER_PACKAGES = (f"dbos=={DBOS_VERSION}", "SQLAlchemy==2.1.9", "psycopg[binary]==3.3.9")
PEER_VENV = ROOT / ".cache" / "dbos-venv"
WORKER = Path(__file__).resolve().with_name("dbos_worker.py")
POLICIES = Path(__file__).resolve().parent / "policies"
PEER_PATH = ("dbos", *step_cost.POSTGRES)
SESSIONS, STEPS = 100, 20  # our figure's: bench.tool_roundtrip at 100 sessions, the noop policy's 20 calls


def peer_python() -> Path:
    """The peer venv's interpreter, the venv made (or moved to the pinned versions) first if needed."""
    python, installed = PEER_VENV / "bin" / "python", PEER_VENV / ".installed"
    if not installed.exists() or installed.read_text().split() != list(PEER_PACKAGES):
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_PACKAGES], check=True)
        installed.write_text("\n".join(PEER_PACKAGES) + "\n")
    return python


async def measure(workflows: int = SESSIONS, steps: int = STEPS, rounds: int = 3, warm_up: int = 10) -> dict:
    """`rounds` batches of `workflows` workflows of `steps` no-op steps, each its own window
    (DBOS's launch and `warm_up` workflows before the first); the steps DBOS stored, counted after."""
    settings = CommonSettings()
    database = f"{settings.database}_dbos_peer"
    await _fresh_database(database, urlsplit(settings.postgres_dsn).username or "wakeline_service")
    try:
        run = {"url": with_database(settings.postgres_dsn, database), "workflows": workflows, "steps": steps,
               "warm_up": warm_up, "rounds": rounds}
        version, windows = await _run_worker(run, database,
                                             listening_pid(urlsplit(settings.postgres_dsn).port or 5432, "postgres"))
        stored = await _stored(database)
    finally:
        await _drop_database(database)
    return {"dbos_version": version, "rounds": windows, "stored": stored,
            "expected_steps": (warm_up + rounds * workflows) * steps}


async def _run_worker(run: dict, database: str, postmaster: int | None) -> tuple[str, list[dict]]:
    with tempfile.TemporaryFile() as errors:
        proc = await asyncio.create_subprocess_exec(str(peer_python()), str(WORKER), stdin=subprocess.PIPE,
                                                    stdout=subprocess.PIPE, stderr=errors)
        try:
            ready = await _ask(proc, json.dumps(run), errors)
            # our services (if up, idle) are read too: what they took in the window shows, off the path
            census = Census({**step_cost.services_here(), "dbos": proc.pid}, None, postmaster, database)
            windows = []
            for _ in range(run["rounds"]):
                before, started = census.read(), time.monotonic()
                done = await _ask(proc, "go", errors)
                window = step_cost.Window(PEER_PATH, used_s(before, census.read()), time.monotonic() - started)
                windows.append(window.figures(done["steps"]))
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            await asyncio.wait_for(proc.wait(), 60)
    for figures in windows:
        figures.pop("kafka_requests_per_step")  # no broker on the peer's path
    return ready["dbos"], windows


async def _ask(proc: asyncio.subprocess.Process, line: str, errors) -> dict:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line.encode() + b"\n")
    await proc.stdin.drain()
    answer = await asyncio.wait_for(proc.stdout.readline(), 300)
    if not answer:
        errors.seek(0)
        raise RuntimeError(f"the DBOS worker exited: {errors.read().decode(errors='replace')[-2000:]}")
    return json.loads(answer)


async def _fresh_database(name: str, owner: str) -> None:
    await _drop_database(name)  # a run that died before dropping it
    await _as_superuser(f'CREATE DATABASE "{name}" OWNER "{owner}"')


async def _drop_database(name: str) -> None:
    await _as_superuser(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _as_superuser(statement: str) -> None:
    """One statement on a connection of the cluster's superuser of its own (databases are made
    and dropped outside any transaction)."""
    conn = await superuser()
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def _stored(database: str) -> dict:
    """What DBOS checkpointed: one `operation_outputs` row per step, one `workflow_status` per workflow."""
    conn = await superuser(database)
    try:
        return {"steps": await conn.fetchval("SELECT count(*) FROM dbos.operation_outputs"),
                "workflows_succeeded": await conn.fetchval(
                    "SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'")}
    finally:
        await conn.close()


def medians(costs: list[dict]) -> dict:
    """Steps per second (steps over window) and each part's CPU ms per step, medians over runs."""
    return {"runs": len(costs), "steps": statistics.median(c["steps"] for c in costs),
            "steps_per_s": round(statistics.median(c["steps"] / c["window_s"] for c in costs), 1),
            "cpu_ms_per_step": step_cost.median_per_step(costs)}


def side_by_side(peer: dict, ours: list[dict]) -> dict:
    """The line: the peer's rounds and our round trips (`tool_round_trip_ms` lines) as medians, and
    the ratios whichever way they fall (above 1: the peer is faster, or ours costs more)."""
    theirs, mine = medians(peer["rounds"]), medians([line["cost"] for line in ours])
    return {"bench": "dbos_peer", "dbos_version": peer["dbos_version"], "concurrency": SESSIONS,
            "steps_per_workflow": STEPS, "compared_with": f"tool_round_trip_ms, {SESSIONS} sessions",
            "peer": {**theirs, "stored": peer["stored"], "expected_steps": peer["expected_steps"]},
            "ours": mine,
            "peer_steps_per_s_over_ours": round(theirs["steps_per_s"] / mine["steps_per_s"], 2),
            "our_cpu_ms_per_step_over_peer": {
                part: round(mine["cpu_ms_per_step"][part] / theirs["cpu_ms_per_step"][part], 2)
                for part in ("sum", "postgres", "machine")}}


def ours_from(lines: list[dict]) -> list[dict]:
    """Our round trips at the compared concurrency, among `tool_roundtrip.run_against_floor`'s lines."""
    return [line for line in lines if line["bench"] == "tool_round_trip_ms" and line["concurrent_sessions"] == SESSIONS]


async def run(ours: list[dict]) -> dict:
    return side_by_side(await measure(), ours)


async def _alone(runs: int = 2) -> dict:
    stack = Stack(Path(tempfile.mkdtemp(prefix="wakeline-dbos-peer-")))
    for name in ("archiver", "runner", "brain"):
        stack.start(name, WAKELINE_POLICY_DIR=str(POLICIES), **(UNLIMITED_QUOTAS if name == "brain" else {}))
    try:
        ours = [await tool_roundtrip.run(SESSIONS) for _ in range(runs)]
        return await run(ours)
    finally:
        stack.stop_all()


if __name__ == "__main__":
    if sys.argv[1:] == ["venv"]:  # `make venv`: the peer's venv made with the project's, not in a test's time
        print(peer_python())
    else:
        print(json.dumps(asyncio.run(_alone())), flush=True)
