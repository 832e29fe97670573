"""A/B of archiver code trees, interleaved in one run, with the COPY and unnest floors every
round (`archiver_throughput`'s own pieces). Not part of `make bench`: a tool for measuring a
change to the archiver on a shared machine, where wall rates swing between rounds.

    python -m bench.archiver_ab ROUNDS NAME=PKGDIR [NAME=PKGDIR ...] [--profile=NAME:out.svg]

PKGDIR holds `wakeline` and `wakeline_archiver` (links into a checkout of the code to run)
and goes first on the archiver process's PYTHONPATH; an empty PKGDIR runs this worktree.
`NAME=PKGDIR,VAR=VALUE,...` also sets those environment variables for that tree's archiver
(`two=,WAKELINE_ARCHIVER_CONCURRENT_BATCHES=2`: one tree under two settings).
Besides events/s it reports, per stored event from the first stored row to the last, the
archiver process's CPU and its Postgres backends' CPU (from /proc), which contention moves
far less than it moves wall time. `--profile` records a py-spy flame graph of that tree's
first run (py-spy must be on PATH).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
from typing import Any

from bench import archiver_throughput as bench
from bench.harness import ROOT

TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _postgres_cpu_s() -> float:
    """CPU seconds of the local cluster's live backends (the archiver's pool among them)."""
    status = subprocess.run(["bash", str(ROOT / "deploy/postgres/pg.sh"), "status"], capture_output=True, text=True)
    data = dict(line.split("=", 1) for line in status.stdout.splitlines() if "=" in line)["data"]
    postmaster = int(open(f"{data}/postmaster.pid").readline())
    total = 0.0
    for pid in open(f"/proc/{postmaster}/task/{postmaster}/children").read().split():
        try:
            total += _cpu_s(int(pid))
        except OSError:  # a backend that ended meanwhile
            continue
    return total


class Probe:
    """Wraps the bench's archiver start and row count to sample CPU at the first and last count."""

    def __init__(self, profiles: dict[str, str]):
        self.profiles = profiles
        self.tree = ""
        self.samples: dict[str, Any] = {}
        self._start, self._count = bench._start_archiver, bench._count
        bench._start_archiver, bench._count = self.start, self.count  # type: ignore[assignment]

    def start(self, group: str) -> subprocess.Popen:
        proc = self._start(group)
        self.samples = {"proc": proc}
        out = self.profiles.pop(self.tree, None)
        if out:
            self.samples["spy"] = subprocess.Popen(["py-spy", "record", "-o", out, "--pid", str(proc.pid), "-r", "200",
                                                    "--nonblocking"], stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL)
        return proc

    async def count(self, conn: Any, ids: list[str]) -> int:
        stored = await self._count(conn, ids)
        if stored:
            now = (stored, _cpu_s(self.samples["proc"].pid), _postgres_cpu_s())
            self.samples.setdefault("first", now)
            self.samples["last"] = now
        return stored

    def per_event_us(self) -> tuple[float, float]:
        if "spy" in self.samples:
            self.samples["spy"].wait(timeout=60)
        (n0, a0, p0), (n1, a1, p1) = self.samples["first"], self.samples["last"]
        return round(1e6 * (a1 - a0) / (n1 - n0), 1), round(1e6 * (p1 - p0) / (n1 - n0), 1)


def main(rounds: int, trees: dict[str, str], profiles: dict[str, str], sessions: int = 200,
         per_session: int = 200) -> dict[str, Any]:
    probe = Probe(profiles)
    runs: dict[str, list[float]] = {}
    for round_ in range(rounds):
        for tree in (list(trees) if round_ % 2 == 0 else list(reversed(trees))):
            pkgdir, *assignments = trees[tree].split(",")
            saved = dict(os.environ)
            os.environ.update(a.split("=", 1) for a in assignments)
            os.environ["PYTHONPATH"], probe.tree = pkgdir, tree
            try:
                line = asyncio.run(bench.archiver_rate(sessions, per_session))
            finally:
                os.environ.clear()
                os.environ.update(saved)
            cpu_us, postgres_us = probe.per_event_us()
            for key, value in ((tree, line["events_per_s"]), (f"{tree}.cpu_us", cpu_us),
                               (f"{tree}.postgres_us", postgres_us)):
                runs.setdefault(key, []).append(value)
            print(round_, tree, line, "cpu us/event", cpu_us, "postgres us/event", postgres_us, flush=True)
        os.environ["PYTHONPATH"] = ""
        copy = asyncio.run(bench.copy_rate(sessions, per_session))
        unnest = asyncio.run(bench.insert_rate(sessions, per_session))
        runs.setdefault("copy", []).append(copy["events_per_s"])
        runs.setdefault("unnest", []).append(unnest["events_per_s"])
        print(round_, "copy", copy, "unnest", unnest, "load", os.getloadavg()[0], flush=True)
    median = {key: statistics.median(values) for key, values in runs.items()}
    return {"runs": runs, "median": median,
            "ratio_to_copy_per_round": {t: [round(a / c, 3) for a, c in zip(runs[t], runs["copy"])] for t in trees}}


if __name__ == "__main__":
    args = sys.argv[2:]
    chosen = dict(a.split("=", 1) for a in args if "=" in a and not a.startswith("--"))
    flames = dict(a.removeprefix("--profile=").split(":", 1) for a in args if a.startswith("--profile="))
    print(json.dumps(main(int(sys.argv[1]), chosen, flames)))
