"""`python -m bench.cost [LABEL]` (`make bench-cost`): where a tool step's CPU goes, as one table.

The tool round trip and its floor at 3 and 100 sessions (two runs each, medians), the whole
loop at 500 sessions, each measured by `bench.step_cost`; then one more round trip at 100
sessions with py-spy recording brain, runner and archiver (flame graphs under
bench/results/profiles/cost-LABEL-<service>.svg; py-spy's own sampling is in no figure above).
Prints the JSON lines, then the Markdown table docs/benchmarks.md quotes. About three minutes.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import scale, tool_roundtrip
from tests.e2e.stack import Stack

PROFILES = Path(__file__).resolve().parent / "results" / "profiles"
POLICIES = Path(__file__).resolve().parent / "policies"
PARTS = ("brain", "runner", "archiver", "broker", "postgres_backends", "postgres_background",
         "postgres_postmaster", "postgres_ended", "bench", "postgres_bench", "floor_echo")
FLAMED = ("brain", "runner", "archiver")


async def flame_graphs(stack: Stack, label: str, sessions: int = 100) -> dict[str, str]:
    """A round trip at `sessions` with py-spy on each service; SIGINT makes py-spy write its graph."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    PROFILES.mkdir(parents=True, exist_ok=True)
    out = {name: PROFILES / f"cost-{label}-{name}.svg" for name in FLAMED}
    spies = [subprocess.Popen([spy, "record", "--nonblocking", "--rate", "200", "-o", str(out[name]),
                               "--pid", str(stack.services[name].proc.pid)],  # type: ignore[union-attr]
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for name in FLAMED]
    try:
        await asyncio.sleep(1)  # attached before the first call
        await tool_roundtrip.round_trips(sessions, 600)
    finally:
        for proc in spies:
            proc.send_signal(signal.SIGINT)
        for proc in spies:
            proc.wait(timeout=60)
    return {name: str(path.relative_to(PROFILES.parents[2])) for name, path in out.items() if path.exists()}


def columns(lines: list[dict]) -> dict[str, dict]:
    """Each measured configuration's CPU ms per step by part, and its other per-step figures."""
    found: dict[str, dict] = {}
    for line in lines:
        if line["bench"] == "tool_round_trip_vs_floor":
            n = line["concurrent_sessions"]
            found[f"floor, {n} sessions"] = {"cpu": line["floor_cpu_ms_per_step"]}
            found[f"tool round trip, {n} sessions"] = {"cpu": line["cpu_ms_per_step"]}
        elif line["bench"] == "scale_whole_loop":
            found[f"whole loop, {line['sessions']} sessions"] = {"cpu": line["cost"]["cpu_ms_per_step"]}
    return found


def table(lines: list[dict]) -> str:
    cols = columns(lines)
    rows = ["| CPU ms per tool step | " + " | ".join(cols) + " |", "| --- |" + " ---: |" * len(cols)]
    for part in (*PARTS, "sum", "machine"):
        if any(c["cpu"].get(part) for c in cols.values()):
            label = f"**{part}** (on the path)" if part == "sum" else part
            rows.append(f"| {label} | " + " | ".join(f"{c['cpu'].get(part, 0):.2f}" for c in cols.values()) + " |")
    return "\n".join(rows)


async def run(label: str) -> list[dict]:
    stack = Stack(Path(tempfile.mkdtemp(prefix="wakeline-cost-")))
    for name in ("archiver", "runner", "brain"):
        stack.start(name, WAKELINE_POLICY_DIR=str(POLICIES))
    try:
        await asyncio.sleep(8)  # group joins and partition assignment
        lines = await tool_roundtrip.run_against_floor((3, 100), repeats=2)
        lines.append({"bench": "flame_graphs", "sessions": 100, "svg": await flame_graphs(stack, label)})
    finally:
        stack.stop_all()
    return lines + await scale.whole_loop((10, 500))


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else time.strftime("%Y-%m-%d")
    lines = asyncio.run(run(label))
    for line in lines:
        print(json.dumps(line), flush=True)
    print(table(lines))


if __name__ == "__main__":
    main()
