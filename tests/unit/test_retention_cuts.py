"""Which absent seqs a retention cut accounts for: only those of a cut the tombstones agree with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from wakeline.storage.retention_cuts import Cut, retained_out

MAY, JUNE, JULY = (datetime(1950, m, 1, tzinfo=UTC) for m in (5, 6, 7))


def row(seq: int, at: datetime, *, present: bool) -> dict:
    """verify's joined row: the events columns (None when absent) and the event_keys ones."""
    return {"at_seq": seq, "seq": seq if present else None, "ts": at if present else None,
            "key_seq": seq, "key_ts": at, "key_hash": f"h{seq}"}


def session(dropped: int, kept: int) -> list[dict]:
    """`dropped` seqs in May, absent from events; then `kept` seqs in June, present."""
    return ([row(s, MAY + timedelta(hours=s), present=False) for s in range(1, dropped + 1)]
            + [row(s, JUNE + timedelta(hours=s), present=True) for s in range(dropped + 1, dropped + kept + 1)])


def test_a_cut_whose_head_matches_its_tombstone_accounts_for_every_seq_up_to_it() -> None:
    assert retained_out(session(3, 2), [Cut(range_from=MAY, range_to=JUNE, seq=3, hash="h3")]) == (
        frozenset({1, 2, 3}), [])


def test_absent_seqs_without_a_cut_are_not_accounted_for() -> None:
    assert retained_out(session(3, 2), []) == (frozenset(), [])


def test_a_seq_past_the_cut_head_is_not_accounted_for() -> None:
    seqs, problems = retained_out(session(3, 2), [Cut(range_from=MAY, range_to=JUNE, seq=2, hash="h2")])
    assert (seqs, problems) == (frozenset({1, 2}), [])


def test_a_head_that_disagrees_with_event_keys_voids_the_cut() -> None:
    seqs, problems = retained_out(session(3, 2), [Cut(range_from=MAY, range_to=JUNE, seq=3, hash="forged")])
    assert seqs == frozenset() and [seq for seq, _ in problems] == [3]
    assert "disagrees with event_keys at seq 3" in problems[0][1]


def test_a_head_outside_the_cut_range_voids_the_cut() -> None:
    seqs, problems = retained_out(session(3, 2), [Cut(range_from=JUNE, range_to=JULY, seq=3, hash="h3")])
    assert seqs == frozenset() and [seq for seq, _ in problems] == [3, 4, 5]


def test_rows_left_inside_a_cut_range_void_it() -> None:
    seqs, problems = retained_out(session(3, 2), [Cut(range_from=MAY, range_to=JULY, seq=3, hash="h3")])
    assert seqs == frozenset()
    assert [seq for seq, reason in problems if "still in events" in reason] == [4, 5]


def test_an_unregistered_head_voids_the_cut() -> None:
    seqs, problems = retained_out(session(3, 2), [Cut(range_from=MAY, range_to=JUNE, seq=9, hash="h9")])
    assert seqs == frozenset() and problems == [
        (9, f"{Cut(range_from=MAY, range_to=JUNE, seq=9, hash='h9')}: its chain head, seq 9, "
            "is not registered in event_keys")]
