"""The declared-tools bench runs in one go: the client round trip beside the runner's, and the
pool's throughput; the lines and ratios are there and sane (not timings). Brain, runner and
archiver run as processes, as in `make bench`; the bench starts its own gateway."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench import client_tools
from tests.e2e.stack import Stack, require_database
from wakeline.runtime.settings import CommonSettings

POLICIES = Path(client_tools.__file__).resolve().parent / "policies"


async def test_client_round_trip_is_reported_beside_the_runners_and_the_pool_answers_every_call(
        kafka: CommonSettings, tmp_path: Path) -> None:
    await asyncio.to_thread(require_database)
    stack = Stack(tmp_path)
    try:
        for name in ("archiver", "runner", "brain"):
            stack.start(name, WAKELINE_POLICY_DIR=str(POLICIES))
        lines = await client_tools.run(sizes=(2,), repeats=1, pool_sessions=4, pool_workers=(2,),
                                       run_dir=tmp_path / "gateway")
    finally:
        stack.stop_all()
    trip, pool = lines
    assert trip["bench"] == "client_round_trip_vs_runner" and trip["concurrent_sessions"] == 2
    # twenty calls a session; only calls sealed before the harness's stream opened are left out
    assert trip["calls"] + trip["left_out_before_connect"] == 2 * 20 and trip["calls"] >= 2 * 18
    assert trip["p50_ratio"] == round(trip["p50"] / trip["runner_p50"], 3) and 0 < trip["p50"] <= trip["p99"]
    assert pool == pool | {"bench": "pool_throughput", "workers": 2, "sessions": 4, "calls": 4 * 5}
    assert pool["calls_per_s"] > 0
