"""The floor bench runs: a bare transactional ping-pong comes back with sane figures (not timings)."""

from __future__ import annotations

from bench import floors
from wakeline.runtime.settings import CommonSettings


async def test_floor_bench_reports_every_round_trip(kafka: CommonSettings) -> None:
    line = await floors.run(sessions=2, rounds=3)
    assert line["bench"] == "tool_round_trip_floor_ms"
    assert line["concurrent_sessions"] == 2
    assert line["n"] == 6
    assert 0 < line["min"] <= line["p50"] <= line["p99"] <= line["max"] < 60_000
