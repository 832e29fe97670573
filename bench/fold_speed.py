"""`python -m bench.fold_speed`: fold of a 10k-event session with the fold's `evolve`
against `dataclasses.replace` (what it used before), side by side in one process."""

from __future__ import annotations

import dataclasses
import json
import statistics
import time

import wakeline.fold as fold_module
from bench.synthetic import session_events


def _median_s(events, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fold_module.fold(events)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run(n: int = 10_000, repeats: int = 5) -> dict:
    events = session_events(n)
    evolve = fold_module.evolve
    try:
        fast = _median_s(events, repeats)
        fold_module.evolve = dataclasses.replace
        slow = _median_s(events, repeats)
    finally:
        fold_module.evolve = evolve
    return {"bench": "fold_ms", "events": n, "evolve_p50": round(fast * 1000, 1),
            "dataclasses_replace_p50": round(slow * 1000, 1), "speedup": round(slow / fast, 2)}


if __name__ == "__main__":
    print(json.dumps(run()))
