"""`make bench`: every benchmark, one JSON line per figure, each beside the floor it is
measured against in the same run (see docs/benchmarks.md for what each line means)."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from bench import (
    archiver_throughput, audit_query, console_render, fold_speed, http_commands, prompt_cache, scale, tool_roundtrip,
    wake_time,
)
from tests.e2e.stack import Stack

POLICIES = Path(__file__).resolve().parent / "policies"


def emit(lines: list[dict] | dict) -> None:
    for line in lines if isinstance(lines, list) else [lines]:
        print(json.dumps(line), flush=True)


def main() -> None:
    emit({"bench": "machine", "cores": os.cpu_count(), "python": platform.python_version(),
          "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "loadavg_1m": os.getloadavg()[0]})
    # first, before the services start: they need only Postgres (or nothing), and nothing competes for the cores
    emit(asyncio.run(audit_query.run()))
    emit(fold_speed.run(repeats=3))
    emit(asyncio.run(prompt_cache.run()))  # no services: the local Messages API server only
    emit(asyncio.run(prompt_cache.run_mixed()))  # thinking, a second message, compactions
    stack = Stack(Path(tempfile.mkdtemp(prefix="wakeline-bench-")))
    for name in ("archiver", "runner", "brain"):
        stack.start(name, WAKELINE_POLICY_DIR=str(POLICIES))
    try:
        emit(asyncio.run(tool_roundtrip.run_against_floor((3, 100), repeats=2)))
        emit(asyncio.run(tool_roundtrip.under_load(100)))  # what bounds the 100-session figure
        emit(asyncio.run(http_commands.run()))
        emit(asyncio.run(wake_time.run(repeats=3)))
        emit(console_render.run())  # its own gateway and Chromium beside these services
    finally:
        stack.stop_all()
    # after the services: it leaves events that the next run's archiver must first skip as redeliveries
    emit(asyncio.run(archiver_throughput.run()))
    # last: each figure starts its own brain, runners and archiver
    emit(asyncio.run(scale.run()))
    emit({"bench": "finished", "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


if __name__ == "__main__":
    main()
