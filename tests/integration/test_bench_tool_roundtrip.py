"""The tool round trip bench runs against its floor in one go: the lines and ratios are there
and sane (not timings). Brain, runner and archiver run as processes, as in `make bench`."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench import tool_roundtrip
from tests.e2e.stack import Stack, require_database
from wakeline.runtime.settings import CommonSettings

POLICIES = Path(tool_roundtrip.__file__).resolve().parent / "policies"


async def test_round_trip_is_reported_as_a_ratio_to_its_floor(kafka: CommonSettings, tmp_path: Path) -> None:
    await asyncio.to_thread(require_database)
    stack = Stack(tmp_path)
    try:
        for name in ("archiver", "runner", "brain"):
            stack.start(name, WAKELINE_POLICY_DIR=str(POLICIES))
        lines = await tool_roundtrip.run_against_floor(sizes=(2,), repeats=1, floor_rounds=3)
        loaded = await tool_roundtrip.under_load(sessions=2, floor_rounds=3, settle_s=0)
    finally:
        stack.stop_all()
    assert [line["bench"] for line in lines] == ["tool_round_trip_floor_ms", "tool_round_trip_ms",
                                                 "tool_round_trip_vs_floor"]
    floor, trip, ratio = lines
    assert floor["n"] == 2 * 3 and trip["n"] == 2 * 20  # the noop policy: twenty calls a session
    assert ratio["concurrent_sessions"] == 2 and ratio["runs"] == 1
    assert ratio["p50_ratio"] == round(trip["p50"] / floor["p50"], 3)
    assert ratio["p99_ratio"] == round(trip["p99"] / floor["p99"], 3)
    assert 0 < ratio["p50_ratio"] < 1_000 and 0 < ratio["p99_ratio"] < 1_000

    assert loaded["bench"] == "tool_round_trip_under_load" and loaded["concurrent_sessions"] == 2
    assert 0 < loaded["p50"] <= loaded["p99"] and 0 < loaded["floor_p50"] <= loaded["floor_p99"]
    assert loaded["in_flight_s"] > 0 and isinstance(loaded["floor_within_load"], bool)
    assert loaded["machine_busy"] is None or 0 <= loaded["machine_busy"] <= 1

    # What each step cost: read from /proc of real processes, never a stub's zeros
    cost, floor_cost = trip["cost"], floor["cost"]
    assert cost["steps"] == trip["n"] and cost["events"] > cost["steps"]
    cpu = cost["cpu_ms_per_step"]
    for part in ("brain", "runner", "archiver", "broker", "postgres"):
        assert cpu[part] > 0, f"{part} used no CPU in the window: {cpu}"
    assert cpu["sum"] >= cpu["broker"] + cpu["postgres"] and abs(sum(cost["share"].values()) - 1) < 0.01
    # six pongs may take the echo process less than one 10 ms tick: found, if not yet seen working
    assert floor_cost["cpu_ms_per_step"]["broker"] > 0 and floor_cost["path"] == ["bench", "floor_echo", "broker"]
    requests = cost["kafka_requests_per_step"]
    assert isinstance(requests, dict), requests  # "jmx: unavailable (...)" says why not
    assert requests["Produce"] > 0 and requests["EndTxn"] > 0 and requests["Fetch"] > 0
    postgres = cost["postgres_per_step"]
    assert postgres["xids"] > 0  # the archiver's transactions
    assert postgres["statements"] is None or postgres["statements"] > 0
