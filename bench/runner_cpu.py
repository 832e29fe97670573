"""`python -m bench.runner_cpu 1,4,1,4 [NAME=PKGDIR ...]`: `scale.runner_scaling` per runner
count, beside how busy the whole machine was (`/proc/stat`, sampled every 0.5 s over the
timed part).

With trees named, each count runs once per tree, one after the other (an A/B on a shared
machine): PKGDIR holds `wakeline_runner` (a link into a checkout's services/runner) and goes
first on the runners' PYTHONPATH; an empty PKGDIR runs this worktree.

It answers whether runner scaling is bound by the runners' slots or by CPU: when one
runner already keeps every core busy, more runners on the same cores cannot help.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time

from bench import scale


TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _cpu_ticks() -> tuple[int, int]:
    """(all ticks, idle + iowait ticks) since boot, over every core."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return sum(values), values[3] + values[4]


class BusySampler(threading.Thread):
    def __init__(self, every_s: float = 0.5):
        super().__init__(daemon=True)
        self.every_s, self.samples, self.stopping = every_s, [], threading.Event()
        self.busy_ticks: list[tuple[float, int]] = []  # (time, busy ticks since boot)

    def run(self) -> None:
        previous = _cpu_ticks()
        while not self.stopping.wait(self.every_s):
            current = _cpu_ticks()
            total, idle = current[0] - previous[0], current[1] - previous[1]
            now = time.monotonic()
            self.samples.append((now, 1 - idle / total if total else 0.0))
            self.busy_ticks.append((now, current[0] - current[1]))
            previous = current

    def busy_s_between(self, start: float, end: float) -> float:
        """CPU seconds the whole machine (every core) spent busy between two samples' times."""
        inside = [(at, ticks) for at, ticks in self.busy_ticks if start <= at <= end]
        return (inside[-1][1] - inside[0][1]) * TICK_S if len(inside) > 1 else float("nan")

    def mean_between(self, start: float, end: float) -> tuple[float, int]:
        inside = [busy for at, busy in self.samples if start + self.every_s <= at <= end]
        return (round(sum(inside) / len(inside), 3) if inside else float("nan")), len(inside)


def per_call(services: dict[str, float], machine_s: float, calls: int) -> dict[str, float]:
    """CPU ms per call: each service's (a runner's with its calls' supervisors and tools), and
    the rest of the machine's (the broker, Postgres, whatever else ran), from CPU seconds in
    the window."""
    figures = {name: round(s * 1000 / calls, 2) for name, s in services.items()}
    figures["rest"] = round((machine_s - sum(services.values())) * 1000 / calls, 2)
    return figures


async def run(counts: tuple[int, ...], sessions: int = 48, trees: dict[str, str] | None = None) -> list[dict]:
    sampler = BusySampler()
    sampler.start()
    lines = []
    try:
        for count in counts:
            for tree, pkgdir in (trees or {"": ""}).items():
                windows: dict[int, tuple[float, float]] = {}
                cpu: dict[int, dict[str, float]] = {}
                env = {"PYTHONPATH": pkgdir} if pkgdir else None
                result = await scale.runner_scaling((count,), sessions=sessions, windows=windows, runner_env=env,
                                                    cpu=cpu)
                busy, n = sampler.mean_between(*windows[count])
                line = {"bench": "runner_cpu", "runners": count, "calls_per_s": result["calls_per_s"][count],
                        "machine_busy": busy, "samples": n,
                        "cpu_ms_per_call": per_call(cpu[count], sampler.busy_s_between(*windows[count]),
                                                    sessions * 5)}
                lines.append({**line, "tree": tree} if trees else line)
                print(json.dumps(lines[-1]), flush=True)
    finally:
        sampler.stopping.set()
    return lines


if __name__ == "__main__":
    wanted = tuple(int(n) for n in (sys.argv[1] if len(sys.argv) > 1 else "1,4").split(","))
    named = dict(arg.split("=", 1) for arg in sys.argv[2:] if "=" in arg)
    asyncio.run(run(wanted, sessions=int(os.environ.get("SESSIONS", "48")), trees=named or None))
