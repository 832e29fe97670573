"""`python -m bench.fold_speed`: the fold of 1k, 10k and 100k-event sessions, and whether it
is linear: per event, each size against the 1k figure (`linearity`, 1.0 is linear).

Side by side in one process, alternated: `fold` (one private builder, frozen once) and the
fold as it was, one `apply` per event (each copies the state's growing tuples: quadratic),
the latter only up to `quadratic_up_to` events, where it still ends in seconds.
`untracked_p50` is `fold` again with the input events frozen out of the garbage collector
(`gc.freeze`): its full passes over 100k held events grow with the heap, not with the
fold's own work, and are most of what is left of the 100k figure's excess over linear.
"""

from __future__ import annotations

import functools
import gc
import json
import statistics
import time

from bench.harness import summary
from bench.synthetic import session_events
from wakeline.log.fold import apply, fold
from wakeline.log.state import SessionState


def _ms(fn) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def run(sizes: tuple[int, ...] = (1_000, 10_000, 100_000), repeats: int = 5,
        quadratic_up_to: int = 10_000) -> list[dict]:
    logs = {n: session_events(n) for n in sizes}
    linear: dict[int, list[float]] = {n: [] for n in sizes}
    untracked: dict[int, list[float]] = {n: [] for n in sizes}
    each: dict[int, list[float]] = {n: [] for n in sizes if n <= quadratic_up_to}
    for _ in range(repeats):
        for n, events in logs.items():
            linear[n].append(_ms(lambda: fold(events)))
            gc.freeze()
            untracked[n].append(_ms(lambda: fold(events)))
            gc.unfreeze()
            if n in each:
                each[n].append(_ms(lambda: functools.reduce(apply, events, SessionState())))
    per_event_1k = statistics.median(linear[min(sizes)]) / min(sizes)
    untracked_1k = statistics.median(untracked[min(sizes)]) / min(sizes)
    lines = []
    for n in sizes:
        p50 = statistics.median(linear[n])
        line = {"bench": "fold_ms", "events": n, **summary(linear[n]),
                "per_event_us": round(p50 / n * 1000, 2), "linearity": round(p50 / n / per_event_1k, 2),
                "untracked_p50": round(statistics.median(untracked[n]), 3),
                "untracked_linearity": round(statistics.median(untracked[n]) / n / untracked_1k, 2)}
        if n in each:
            before = statistics.median(each[n])
            line.update(apply_each_p50=round(before, 3), speedup=round(before / p50, 2))
        lines.append(line)
    return lines


if __name__ == "__main__":
    for line in run():
        print(json.dumps(line))
