"""The wake and fold benches run: small sessions, one with a snapshot, come back with the
expected keys and sane figures (not timings)."""

from __future__ import annotations

from bench import fold_speed, wake_time
from conftest_pg import require_postgres
from wakeline.contract.codec import encode
from wakeline.runtime.settings import CommonSettings
from wakeline.log.snapshots import checked_fold


def test_the_bench_log_is_a_valid_log_whose_snapshots_hold_their_prefixes() -> None:
    log = wake_time.brain_log(500, snapshot_every=100, compact_every=120)
    assert checked_fold(log).last_seq == 500
    assert [e.seq for e in log if e.type == "snapshot"] == [101, 202, 303, 404]
    assert sum(e.type == "compaction" for e in log) == 4


def test_the_bench_log_leaves_out_a_snapshot_over_the_record_limit_as_the_brain_does() -> None:
    first = next(e for e in wake_time.brain_log(500, snapshot_every=100, compact_every=120) if e.type == "snapshot")
    limit = len(encode(first)) - 1  # the snapshot at 101 no longer fits
    log = wake_time.brain_log(500, snapshot_every=100, compact_every=120, max_record_bytes=limit)
    assert checked_fold(log).last_seq == 500
    seqs = [e.seq for e in log if e.type == "snapshot"]
    assert 101 not in seqs and all(len(encode(e)) <= limit for e in log if e.type == "snapshot")
    # A refusal restarts the count at the event before it: the next try is 100 events on, not 101.
    assert seqs[:1] in ([], [201], [301], [401])
    none_fit = wake_time.brain_log(500, snapshot_every=100, compact_every=120, max_record_bytes=2_000)
    assert len(none_fit) == 500 and not any(e.type == "snapshot" for e in none_fit)


async def test_wake_bench_reports_each_size_against_the_smallest_and_the_floor(kafka: CommonSettings) -> None:
    await require_postgres()
    lines = await wake_time.run(sizes=(50, 300), repeats=2, snapshot_every=100)
    assert [(ln["bench"], ln["events"], ln["n"]) for ln in lines] == [("wake_ms", 50, 2), ("wake_ms", 300, 2)]
    small, big = lines
    assert (small["snapshot_seq"], small["events_read"], big["snapshot_seq"], big["events_read"]) == (None, 50, 202, 99)
    assert small["ratio_to_1k"] == 1.0 and big["snapshot_at_end_fits_record"] is True
    for line in lines:
        assert 0 < line["min"] <= line["p50"] <= line["p99"] <= line["max"] < 60_000
        assert line["floor_p50"] > 0 and line["before_p50"] > 0 and line["ratio_to_floor"] > 0 and line["speedup"] > 0


def test_fold_bench_reports_linearity_and_the_per_event_fold_side_by_side() -> None:
    lines = fold_speed.run(sizes=(100, 400), repeats=2, quadratic_up_to=100)
    assert [(ln["bench"], ln["events"]) for ln in lines] == [("fold_ms", 100), ("fold_ms", 400)]
    assert lines[0]["linearity"] == 1.0 and lines[0]["speedup"] > 0 and "speedup" not in lines[1]
    assert all(ln["per_event_us"] > 0 and 0 < ln["p50"] <= ln["max"] and ln["untracked_p50"] > 0 for ln in lines)
    assert lines[0]["untracked_linearity"] == 1.0
