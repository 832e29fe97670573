"""The wake and fold benches run: small sessions, one with a snapshot, come back with the
expected keys and sane figures (not timings)."""

from __future__ import annotations

from bench import fold_speed, wake_time
from conftest_pg import require_postgres
from wakeline.settings import CommonSettings
from wakeline.snapshots import checked_fold


def test_the_bench_log_is_a_valid_log_whose_snapshot_holds_its_prefix() -> None:
    log = wake_time.brain_log(500, snapshot_every=100, compact_every=120)
    assert checked_fold(log).last_seq == 500
    assert [e.seq for e in log if e.type == "snapshot"] == [404]
    assert sum(e.type == "compaction" for e in log) == 4


async def test_wake_bench_reports_each_size_against_the_smallest_and_the_floor(kafka: CommonSettings) -> None:
    await require_postgres()
    lines = await wake_time.run(sizes=(50, 300), repeats=2, snapshot_every=100)
    assert [(ln["bench"], ln["events"], ln["n"]) for ln in lines] == [("wake_ms", 50, 2), ("wake_ms", 300, 2)]
    small, big = lines
    assert (small["snapshot_seq"], small["events_read"], big["snapshot_seq"], big["events_read"]) == (None, 50, 202, 99)
    assert small["ratio_to_1k"] == 1.0 and big["snapshot_fits_record"] is True
    for line in lines:
        assert 0 < line["min"] <= line["p50"] <= line["p99"] <= line["max"] < 60_000
        assert line["floor_p50"] > 0 and line["before_p50"] > 0 and line["ratio_to_floor"] > 0 and line["speedup"] > 0


def test_fold_bench_reports_linearity_and_the_per_event_fold_side_by_side() -> None:
    lines = fold_speed.run(sizes=(100, 400), repeats=2, quadratic_up_to=100)
    assert [(ln["bench"], ln["events"]) for ln in lines] == [("fold_ms", 100), ("fold_ms", 400)]
    assert lines[0]["linearity"] == 1.0 and lines[0]["speedup"] > 0 and "speedup" not in lines[1]
    assert all(ln["per_event_us"] > 0 and 0 < ln["p50"] <= ln["max"] and ln["untracked_p50"] > 0 for ln in lines)
    assert lines[0]["untracked_linearity"] == 1.0
