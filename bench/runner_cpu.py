"""`python -m bench.runner_cpu 1,4,1,4`: `scale.runner_scaling` per runner count, beside how
busy the whole machine was (`/proc/stat`, sampled every 0.5 s over the timed part).

It answers whether runner scaling is bound by the runners' slots or by CPU: when one
runner already keeps every core busy, more runners on the same cores cannot help.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time

from bench import scale


def _cpu_ticks() -> tuple[int, int]:
    """(all ticks, idle + iowait ticks) since boot, over every core."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return sum(values), values[3] + values[4]


class BusySampler(threading.Thread):
    def __init__(self, every_s: float = 0.5):
        super().__init__(daemon=True)
        self.every_s, self.samples, self.stopping = every_s, [], threading.Event()

    def run(self) -> None:
        previous = _cpu_ticks()
        while not self.stopping.wait(self.every_s):
            current = _cpu_ticks()
            total, idle = current[0] - previous[0], current[1] - previous[1]
            self.samples.append((time.monotonic(), 1 - idle / total if total else 0.0))
            previous = current

    def mean_between(self, start: float, end: float) -> tuple[float, int]:
        inside = [busy for at, busy in self.samples if start + self.every_s <= at <= end]
        return (round(sum(inside) / len(inside), 3) if inside else float("nan")), len(inside)


async def run(counts: tuple[int, ...], sessions: int = 48) -> list[dict]:
    sampler = BusySampler()
    sampler.start()
    lines = []
    try:
        for count in counts:
            windows: dict[int, tuple[float, float]] = {}
            result = await scale.runner_scaling((count,), sessions=sessions, windows=windows)
            busy, n = sampler.mean_between(*windows[count])
            lines.append({"bench": "runner_cpu", "runners": count, "calls_per_s": result["calls_per_s"][count],
                          "machine_busy": busy, "samples": n})
    finally:
        sampler.stopping.set()
    return lines


if __name__ == "__main__":
    wanted = tuple(int(n) for n in (sys.argv[1] if len(sys.argv) > 1 else "1,4").split(","))
    for line in asyncio.run(run(wanted)):
        print(json.dumps(line), flush=True)
