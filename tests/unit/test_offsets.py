"""OffsetTracker (libs/wakeline/transport/offsets.py), shared by the brain and the runner."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from wakeline.transport.offsets import OffsetTracker

P0, P1 = ("wakeline.tool-calls", 0), ("wakeline.tool-calls", 1)


def test_nothing_is_committable_before_a_record_is_seen() -> None:
    tracker = OffsetTracker()
    assert tracker.committable(P0) is None
    assert tracker.to_commit() == {}


def test_a_later_record_finishing_first_does_not_move_the_commit_past_an_earlier_one() -> None:
    tracker = OffsetTracker()
    for offset in (10, 11, 12):
        tracker.add(P0, offset)
    tracker.finish(P0, 12)
    tracker.finish(P0, 11)
    assert tracker.committable(P0) == 10
    tracker.finish(P0, 10)
    assert tracker.committable(P0) == 13


def test_gaps_between_offsets_do_not_hold_the_commit_back() -> None:
    tracker = OffsetTracker()
    tracker.add(P0, 5)
    tracker.add(P0, 9)  # 6..8 were transaction markers or compacted away
    tracker.finish(P0, 5)
    assert tracker.committable(P0) == 9
    tracker.finish(P0, 9)
    assert tracker.committable(P0) == 10


def test_to_commit_reports_only_offsets_that_moved_since_the_last_commit() -> None:
    tracker = OffsetTracker()
    tracker.add(P0, 0)
    tracker.add(P1, 0)
    tracker.finish(P0, 0)
    moves = tracker.to_commit()
    assert moves == {P0: 1, P1: 0}
    tracker.mark_committed(moves)
    assert tracker.to_commit() == {}
    tracker.finish(P1, 0)
    assert tracker.to_commit() == {P1: 1}
    assert tracker.to_commit([P0]) == {}


def test_partitions_are_independent() -> None:
    tracker = OffsetTracker()
    tracker.add(P0, 3)
    tracker.add(P1, 7)
    tracker.finish(P1, 7)
    assert tracker.committable(P0) == 3
    assert tracker.committable(P1) == 8


def test_a_dropped_partition_ignores_late_finishes_and_starts_fresh() -> None:
    tracker = OffsetTracker()
    tracker.add(P0, 4)
    tracker.mark_committed({P0: 4})
    tracker.drop([P0])
    tracker.finish(P0, 4)  # a call of a revoked partition finishing late
    assert tracker.committable(P0) is None
    tracker.add(P0, 4)  # the partition comes back and the record is redelivered
    assert tracker.to_commit() == {P0: 4}


def test_in_flight_counts_unfinished_records() -> None:
    tracker = OffsetTracker()
    for offset in range(5):
        tracker.add(P0, offset)
    tracker.finish(P0, 3)
    tracker.finish(P0, 3)  # finishing twice counts once
    assert tracker.in_flight() == 4


@given(st.permutations(list(range(12))), st.integers(min_value=0, max_value=12))
def test_committable_is_the_lowest_unfinished_offset_for_any_finish_order(order, finished_count) -> None:
    tracker = OffsetTracker()
    for offset in range(12):
        tracker.add(P0, offset)
    done = set(order[:finished_count])
    for offset in order[:finished_count]:
        tracker.finish(P0, offset)
    unfinished = [o for o in range(12) if o not in done]
    assert tracker.committable(P0) == (min(unfinished) if unfinished else 12)
