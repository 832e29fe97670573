"""`make bench`: every benchmark, one JSON line per figure, each beside the floor it is
measured against in the same run (see docs/benchmarks.md for what each line means)."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench import (
    archiver_throughput, audit_query, client_tools, console_render, context_cost, dbos_peer, flood, fold_speed,
    http_commands, pool_take, prompt_cache, scale, tail_reads, tool_roundtrip, wake_time,
)
from bench.harness import BENCH_BRAIN, RUNNING_TOTAL, archive_caught_up
from tests.e2e.stack import Stack

POLICIES = Path(__file__).resolve().parent / "policies"


def emit(lines: list[dict] | dict) -> None:
    for line in lines if isinstance(lines, list) else [lines]:
        print(json.dumps(line), flush=True)


def main() -> None:
    emit({"bench": "machine", "cores": os.cpu_count(), "python": platform.python_version(),
          "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "loadavg_1m": os.getloadavg()[0]})
    # first, before the services start: they need only Postgres (or nothing), and nothing competes for the cores
    timed("audit_query", lambda: asyncio.run(audit_query.run()))
    timed("fold_speed", lambda: fold_speed.run(repeats=3))
    timed("context_cost", context_cost.run)  # a model call's request by the session's length (issue 35)
    timed("tail_reads", lambda: asyncio.run(tail_reads.run()))  # Kafka only: a private topic
    timed("pool_take", lambda: asyncio.run(pool_take.run()))  # Postgres only: a pool worker's search
    timed("prompt_cache", lambda: asyncio.run(prompt_cache.run()))  # no services: the local Messages API only
    timed("prompt_cache_mixed", lambda: asyncio.run(prompt_cache.run_mixed()))  # thinking, compactions
    stack = Stack(Path(tempfile.mkdtemp(prefix="wakeline-bench-")))
    started = time.monotonic()
    for name in ("archiver", "runner", "brain"):
        stack.start(name, WAKELINE_POLICY_DIR=str(POLICIES), **(BENCH_BRAIN if name == "brain" else {}))
    emit({"bench": "section_s", "section": "services_start", "s": round(time.monotonic() - started, 1)})
    try:
        # nothing is measured while the archiver reads what earlier runs left on the topic
        timed("archive_caught_up", lambda: asyncio.run(archive_caught_up()))
        trips = timed("tool_roundtrip", lambda: asyncio.run(tool_roundtrip.run_against_floor((3, 100), repeats=2)))
        # DBOS's no-op steps at the concurrency of the 100-session round trips just measured, beside them
        timed("dbos_peer", lambda: asyncio.run(dbos_peer.run(dbos_peer.ours_from(trips))))
        timed("tool_roundtrip_under_load", lambda: asyncio.run(tool_roundtrip.under_load(100)))
        timed("client_tools", lambda: asyncio.run(client_tools.run()))  # its own gateway, a harness per session
        timed("http_commands", lambda: asyncio.run(http_commands.run()))
        timed("wake_time", lambda: asyncio.run(wake_time.run(repeats=3)))
        # quiet, then beside a tenant flooding at 10x its quota; its own gateway, its sessions drained after
        timed("fair_share_flood", lambda: [{**figure, "running_total": RUNNING_TOTAL} for figure in fair_share()])
        timed("console_render", console_render.run)  # its own gateway and Chromium beside these services
    finally:
        stack.stop_all()
    # after the services: it leaves events that the next run's archiver must first skip as redeliveries
    timed("archiver_throughput", lambda: asyncio.run(archiver_throughput.run()))
    # last: each figure starts its own brain, runners and archiver
    timed("scale", lambda: asyncio.run(scale.run()))
    emit({"bench": "finished", "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


def fair_share() -> list[dict]:
    """`burst` three times and `paced` once, then each plan's median."""
    lines = asyncio.run(flood.run(flood.BENCH_PLANS))
    return lines + flood.medians(lines)


def timed(section: str, run: Callable[[], list[dict] | dict]) -> list[dict]:
    """Emits a section's lines, then how long it took (`make bench` should stay near 10 minutes);
    returns the lines, for a later section that compares with them."""
    started = time.monotonic()
    lines = run()
    emit(lines)
    emit({"bench": "section_s", "section": section, "s": round(time.monotonic() - started, 1)})
    return lines if isinstance(lines, list) else [lines]


if __name__ == "__main__":
    main()
