"""`bench.dbos_peer`'s line, pure: both sides as medians of their runs (steps over the window,
CPU per step by part), ours picked from the round trips at the compared concurrency, and the
ratios whichever way they fall."""

from __future__ import annotations

from bench.dbos_peer import ours_from, side_by_side


def _cost(steps: int, window_s: float, **cpu: float) -> dict:
    return {"steps": steps, "window_s": window_s, "cpu_ms_per_step": cpu}


def test_the_line_sets_the_peers_medians_beside_ours_with_both_ratios() -> None:
    peer = {"dbos_version": "9.9.9", "stored": {"steps": 6200, "workflows_succeeded": 310}, "expected_steps": 6200,
            "rounds": [_cost(2000, 5.0, dbos=2.0, postgres=1.0, sum=3.0, machine=4.0),
                       _cost(2000, 4.0, dbos=3.0, postgres=0.5, sum=3.5, machine=5.0),
                       _cost(2000, 8.0, dbos=9.0, postgres=2.0, sum=11.0, machine=12.0)]}
    ours = [{"bench": "tool_round_trip_ms", "concurrent_sessions": 100,
             "cost": _cost(2000, 10.0, brain=1.5, postgres=2.0, sum=8.0, machine=12.0)},
            {"bench": "tool_round_trip_ms", "concurrent_sessions": 100,
             "cost": _cost(2000, 8.0, brain=1.7, postgres=1.0, sum=6.0, machine=10.0)}]
    got = side_by_side(peer, ours)
    assert got["dbos_version"] == "9.9.9" and got["concurrency"] == 100 and got["steps_per_workflow"] == 20
    assert got["peer"]["steps_per_s"] == 400.0 and got["peer"]["cpu_ms_per_step"]["sum"] == 3.5
    assert got["peer"]["stored"]["steps"] == got["peer"]["expected_steps"]
    assert got["ours"]["runs"] == 2 and got["ours"]["steps_per_s"] == 225.0
    assert got["ours"]["cpu_ms_per_step"] == {"brain": 1.6, "postgres": 1.5, "sum": 7.0, "machine": 11.0}
    assert got["peer_steps_per_s_over_ours"] == 1.78  # 400 / 225: the peer faster
    assert got["our_cpu_ms_per_step_over_peer"] == {"sum": 2.0, "postgres": 1.5, "machine": 2.2}


def test_ours_are_the_round_trips_at_the_compared_concurrency_not_the_floors_or_other_sizes() -> None:
    lines = [{"bench": "tool_round_trip_ms", "concurrent_sessions": 3},
             {"bench": "tool_round_trip_floor_ms", "concurrent_sessions": 100},
             {"bench": "tool_round_trip_ms", "concurrent_sessions": 100, "n": 1},
             {"bench": "tool_round_trip_vs_floor", "concurrent_sessions": 100},
             {"bench": "tool_round_trip_ms", "concurrent_sessions": 100, "n": 2}]
    assert [line["n"] for line in ours_from(lines)] == [1, 2]
