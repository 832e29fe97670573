"""What metrics and traces cost on the tool round trip: three variants of the same services,
interleaved round after round, with the bare two-hop floor measured in every round.

    python -m bench.observability_ab [ROUNDS]

Variants: `off` (WAKELINE_METRICS_ENABLED=false, no OTLP endpoint), `metrics` (the default:
a Prometheus endpoint per service, no traces), `metrics+traces` (and every span exported
over OTLP/HTTP to a local sink that answers 200 and counts what it received, so the
exporter does all its work). Each round starts archiver, runner and brain with the
variant's environment, measures the 3-session tool round trip (`tool_roundtrip.run`) and
the floor (`floors.run`), and stops them. Per variant it prints the medians of the
rounds' p50 and p99, their ratio to the floor, and the brain's and runner's CPU per round
trip (from /proc: contention moves it far less than wall time). Not part of `make bench`
(it restarts the services every round); written into docs/operations.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench import floors, tool_roundtrip
from bench.harness import ROOT
from tests.e2e.stack import Stack, free_port

TICK = os.sysconf("SC_CLK_TCK")
POLICIES = ROOT / "bench" / "policies"


class _Sink(BaseHTTPRequestHandler):
    received = 0

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).received += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _variants(sink: str) -> dict[str, dict[str, str]]:
    return {"off": {"WAKELINE_METRICS_ENABLED": "false"},
            "metrics": {},
            "metrics+traces": {"WAKELINE_OTLP_ENDPOINT": sink}}


async def _round(name: str, env: dict[str, str], run_dir: Path) -> dict:
    stack = Stack(run_dir / f"{name}-{time.monotonic_ns()}")
    for service in ("archiver", "runner", "brain"):
        stack.start(service, WAKELINE_POLICY_DIR=str(POLICIES), WAKELINE_METRICS_PORT=str(free_port()), **env)
    try:
        await asyncio.sleep(8)  # group joins and assignment, before the clock starts
        floor = await floors.run(3, 20)
        cpu0 = {s: _cpu_s(stack.services[s].proc.pid) for s in ("brain", "runner")}  # type: ignore[union-attr]
        trip = await tool_roundtrip.run(3)
        cpu = {s: _cpu_s(stack.services[s].proc.pid) - cpu0[s] for s in cpu0}  # type: ignore[union-attr]
    finally:
        stack.stop_all()
    return {"variant": name, "floor_p50": floor["p50"], "p50": trip["p50"], "p99": trip["p99"], "n": trip["n"],
            **{f"{s}_cpu_ms_per_trip": round(1000 * c / trip["n"], 3) for s, c in cpu.items()}}


async def main(rounds: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sink = f"http://127.0.0.1:{server.server_address[1]}"
    variants = _variants(sink)
    run_dir = Path(tempfile.mkdtemp(prefix="wakeline-obs-ab-"))
    results: dict[str, list[dict]] = {name: [] for name in variants}
    for r in range(rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in order:
            line = await _round(name, variants[name], run_dir)
            results[name].append(line)
            print(json.dumps({"bench": "observability_ab_round", "round": r, **line}), flush=True)
    for name, lines in results.items():
        med = {k: round(statistics.median(x[k] for x in lines), 3)
               for k in ("floor_p50", "p50", "p99", "brain_cpu_ms_per_trip", "runner_cpu_ms_per_trip")}
        print(json.dumps({"bench": "observability_ab", "variant": name, "rounds": rounds, **med,
                          "p50_ratio_to_floor": round(med["p50"] / med["floor_p50"], 3)}), flush=True)
    print(json.dumps({"bench": "observability_ab_sink", "otlp_posts_received": _Sink.received}), flush=True)
    server.shutdown()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
