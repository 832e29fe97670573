"""What a step costs the whole machine: CPU per tool step of every process on its path (the
Python services, the broker's JVM, the Postgres cluster), Kafka requests per step by API key,
Postgres statements per step, over one measured window.

`make bench` measures every tool round trip (3 and 100 sessions), every floor beside it and
every whole-loop size with `window()`; the figures land in each line's `cost`. `python -m
bench.cost` (`make bench-cost`) prints them as one table, with flame graphs.

The broker and Postgres serve whatever else runs on this machine too (other checkouts' tests
on a shared stack): their figures are everything they did in the window, and `machine` (all
cores, /proc/stat) beside the sum shows how much ran that no part here accounts for.
"""

from __future__ import annotations

import atexit
import os
import statistics
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bench import kafka_requests, pg_statements
from bench.kafka_requests import KafkaRequests
from bench.pg_statements import PgStatements
from bench.process_cpu import Census, children, listening_pid, title, used_s
from wakeline.runtime.settings import CommonSettings

POSTGRES = ("postgres_backends", "postgres_background", "postgres_postmaster", "postgres_ended")
SERVICES = ("gateway", "brain", "runner", "archiver")
TRIP_PATH = (*SERVICES, "broker", *POSTGRES)  # the bench client (creates sessions, polls) is off it
FLOOR_PATH = ("bench", "floor_echo", "broker")  # this process is the floor's brain side


def services_here() -> dict[str, int]:
    """The services this process started (tests.e2e.stack: `python -m wakeline_<kind>`) and a
    floor's echo process, by name: a second of a kind is `runner-2`."""
    found: dict[str, int] = {}
    for pid in children(os.getpid()):
        try:
            words = title(pid).split()
        except OSError:
            continue
        module = words[words.index("-m") + 1] if "-m" in words[:-1] else ""
        name = module.removeprefix("wakeline_") if module.startswith("wakeline_") else (
            "floor_echo" if module == "bench.floors" else None)
        if name:
            found[name if name not in found else f"{name}-{sum(n.startswith(name) for n in found) + 1}"] = pid
    return found


class Machine:
    """The broker, the postmaster and the JMX reader, found once per process."""

    _one: "Machine | None" = None

    def __init__(self) -> None:
        settings = CommonSettings()
        self.database = settings.database
        self.broker = listening_pid(int(settings.kafka_bootstrap.split(",")[0].rsplit(":", 1)[1]), "kafka.Kafka")
        self.postmaster = listening_pid(urlsplit(settings.postgres_dsn).port or 5432, "postgres")
        self.requests = KafkaRequests(self.broker)
        atexit.register(self.requests.close)

    @classmethod
    def here(cls) -> "Machine":
        if cls._one is None:
            cls._one = cls()
        return cls._one


@dataclass
class Window:
    """Filled in by `window()` when it closes; `figures(steps, events)` makes the line's `cost`."""

    path: tuple[str, ...]
    used: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    requests: tuple[dict[str, int], dict[str, int]] | None = None
    requests_unavailable: str | None = None
    pg: tuple[pg_statements.PgCounts, pg_statements.PgCounts] | None = None
    pg_unavailable: str | None = None

    def figures(self, steps: int, events: int | None = None) -> dict:
        per_step = {name: round(s * 1000 / steps, 3) for name, s in sorted(self.used.items())}
        path = [name for name in self.path if name in self.used]  # the gateway is on no bench path here
        on_path = sum(self.used[name] for name in path)
        per_step["postgres"] = round(sum(self.used.get(n, 0.0) for n in POSTGRES) * 1000 / steps, 3)
        per_step["sum"] = round(on_path * 1000 / steps, 3)
        line: dict = {"steps": steps, "window_s": round(self.seconds, 2), "path": path,
                      "cpu_ms_per_step": per_step,
                      "share": {n: round(self.used[n] / on_path, 3) for n in path} if on_path else {},
                      "kafka_requests_per_step": kafka_requests.per_step(*self.requests, steps) if self.requests
                      else self.requests_unavailable}
        if events:
            line["events"] = events
            line["cpu_ms_per_event_sum"] = round(on_path * 1000 / events, 3)
        if self.pg is not None:
            line["postgres_per_step"] = pg_statements.per_step(*self.pg, steps)
            if self.pg_unavailable:
                line["postgres_per_step"]["statements_unavailable"] = self.pg_unavailable
        return line


@asynccontextmanager
async def window(path: Iterable[str] = TRIP_PATH, postgres: bool = True,
                 bench_backends: Iterable[int] = ()) -> AsyncIterator[Window]:
    """Readings of every part just inside the block's start and end (the readers' own set-up
    outside it): the services are this process's children at the start. `bench_backends`:
    the server pids of this bench's own connections, open across the block (`postgres_bench`)."""
    machine = Machine.here()
    census = Census(services_here(), machine.broker, machine.postmaster, machine.database,
                    bench_backends=frozenset(bench_backends))
    measured = Window(tuple(path))
    pg = await PgStatements.open(machine.database) if postgres and machine.postmaster else None
    try:
        pg_before = await pg.counts() if pg else None
        requests_before = machine.requests.counts()
        cpu_before, started = census.read(), time.monotonic()
        yield measured
        cpu_after, measured.seconds = census.read(), time.monotonic() - started
        requests_after = machine.requests.counts()
        if pg is not None and pg_before is not None:
            measured.pg, measured.pg_unavailable = (pg_before, await pg.counts()), pg.unavailable
    finally:
        if pg is not None:
            await pg.close()
    measured.used = used_s(cpu_before, cpu_after)
    if requests_before is not None and requests_after is not None:
        measured.requests = (requests_before, requests_after)
    if machine.requests.unavailable:
        measured.requests_unavailable = f"jmx: unavailable ({machine.requests.unavailable})"


def median_per_step(costs: Iterable[dict]) -> dict[str, float]:
    """Each part's median CPU ms per step over several windows' `cost` (noise falls on all)."""
    runs = [c["cpu_ms_per_step"] for c in costs]
    return {name: round(statistics.median(r.get(name, 0.0) for r in runs), 3) for name in runs[0]}
