"""make chaos reads brain partition ownership from the logs; the longest unowned gap is right."""

from __future__ import annotations

from bench.chaos.ownership import Change, changes_from_log, held_at, log_time, longest_unowned


def line(clock: str, text: str) -> str:
    return f"2026-11-30 12:00:{clock} brain INFO x: {text}"


def tps(*partitions: int) -> str:
    return "frozenset({" + ", ".join(f"TopicPartition(topic='wakeline.inbox', partition={p}), "
                                     f"TopicPartition(topic='wakeline.tool-results', partition={p})"
                                     for p in partitions) + "})"


def test_a_partition_is_served_only_while_assigned_and_its_writer_held_and_not_after_a_kill():
    lines = [line("00,000", f"Setting newly assigned partitions {tps(0, 1)} for group wakeline-brain"),
             line("01,000", "brain brain-1 owns partitions [0]"),
             line("02,000", "brain brain-1 owns partitions [0, 1]"),
             line("03,000", f"Revoking previously assigned partitions {tps(0, 1)} for group wakeline-brain"),
             line("04,000", f"Setting newly assigned partitions {tps(1)} for group wakeline-brain"),
             line("09,000", "brain brain-1 owns partitions [1, 2]")]
    t0 = log_time(lines[0])
    changes = changes_from_log("brain-1.1", lines, ended_at=t0 + 6)
    assert [sorted(c.owned) for c in changes] == [[], [0], [0, 1], [], [1], []]
    assert held_at(changes, "brain-1.1", t0 + 5) == {1}


def test_longest_unowned_is_the_longest_stretch_with_no_holder_per_partition():
    changes = [Change(0, "a", frozenset({0, 1}), frozenset({0, 1})),
               Change(10, "a", frozenset(), frozenset()),           # killed
               Change(13, "b", frozenset({0}), frozenset({0})),
               Change(18, "b", frozenset({0, 1}), frozenset({0, 1}))]
    assert longest_unowned(changes, 2, start=5, end=30) == {0: 3.0, 1: 8.0}


def test_a_partition_never_owned_counts_the_whole_window():
    assert longest_unowned([Change(0, "a", frozenset({0}), frozenset({0}))], 2, start=1, end=4) == {0: 0.0, 1: 3.0}


def test_assignments_are_read_under_any_topic_prefix():
    lines = [line("00,000", "Setting newly assigned partitions {TopicPartition(topic='wakeline-churn.inbox', "
                            "partition=4)} for group wakeline-churn-brain"),
             line("01,000", "brain brain-1 owns partitions [4]")]
    assert [sorted(c.owned) for c in changes_from_log("brain-1.1", lines, ended_at=None)] == [[], [4]]
