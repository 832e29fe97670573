"""The tool round trip under two (or more) sets of service settings, side by side.

    python -m bench.settings_ab SIZES ROUNDS 'NAME=VALUE ...' 'NAME=VALUE ...'
    python -m bench.settings_ab 3,100 2 'WAKELINE_MODEL_LINGER_MS=0 WAKELINE_OFFSETS_EVERY_S=0' \\
                                        'WAKELINE_MODEL_LINGER_MS=5 WAKELINE_OFFSETS_EVERY_S=1'

Each round starts archiver, runner and brain with one variant's environment (the same for
all three), runs `tool_roundtrip.run_against_floor(SIZES, repeats=2)` (the bare two-hop
floor alternated with the round trip) and stops them; the variants take turns, round after
round, so the machine's noise falls on all of them. One JSON line per size, variant and
round, and one per round trip measured (`settings_ab_run`, with its `cost`). Not part of
`make bench` (it restarts the services every round); the figures it gave are in
docs/history/benchmarks.md.

A variant may be code rather than settings: `PYTHONPATH=<a checkout's libs>` runs the
services on that checkout's `wakeline` package (docs/benchmarks.md, issue 35's pool reset).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from bench import tool_roundtrip
from bench.harness import ROOT, UNLIMITED_QUOTAS
from tests.e2e.stack import Stack

POLICIES = ROOT / "bench" / "policies"


def _variant(text: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in text.split())


async def _round(sizes: tuple[int, ...], env: dict[str, str], run_dir: Path) -> list[dict]:
    stack = Stack(Path(tempfile.mkdtemp(prefix="wakeline-ab-", dir=run_dir)))
    for service in ("archiver", "runner", "brain"):
        # unlimited quotas, as in `make bench`: rounds of 100 sessions pass the default 600 a minute
        quotas = UNLIMITED_QUOTAS if service == "brain" else {}
        stack.start(service, WAKELINE_POLICY_DIR=str(POLICIES), **{**quotas, **env})
    try:
        await tool_roundtrip.run(3)  # warm-up: group joins, connections, the first wakes
        lines = await tool_roundtrip.run_against_floor(sizes, repeats=2)
    finally:
        stack.stop_all()
    # each round trip's own line too: its `cost` has Postgres's statements per step
    return [line for line in lines if line["bench"] in ("tool_round_trip_vs_floor", "tool_round_trip_ms")]


def main(argv: list[str]) -> None:
    sizes = tuple(int(n) for n in argv[0].split(","))
    rounds, variants = int(argv[1]), [_variant(v) for v in argv[2:]]
    run_dir = Path(tempfile.mkdtemp(prefix="wakeline-settings-ab-"))
    for round_ in range(1, rounds + 1):
        for env in variants:
            for line in asyncio.run(_round(sizes, env, run_dir)):
                bench = "settings_ab" if line["bench"] == "tool_round_trip_vs_floor" else "settings_ab_run"
                print(json.dumps({**line, "bench": bench, "round": round_, "settings": env}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
