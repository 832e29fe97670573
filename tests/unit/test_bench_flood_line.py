"""`bench.flood`'s figure line, pure: the ratio to the quiet run, the 2x mark, and where the
flooded sessions' time went."""

from __future__ import annotations

from collections import Counter

from bench.flood import Flood, Plan, Timed, line


def test_the_line_marks_a_p99_past_twice_the_quiet_one_and_names_the_slow_batch() -> None:
    quiet = [Timed(1.0, 0.1)] * 10
    flooded = [[Timed(1.5, 0.2)] * 9 + [Timed(2.5, 1.0)], [Timed(1.2, 0.1)] * 10]
    flood = Flood(answers=Counter({"202": 3, "429": 27}), accepted=["a", "b", "c"])
    got = line(Plan(), quiet, flooded, flood, Counter({"running": 3}), {"ended": 3, "no_row": 0})
    assert got["steady_quiet_s"]["p99"] == 1.0 and got["steady_flooded_s"]["max"] == 2.5
    assert got["p99_ratio"] == 2.5 and got["p99_within_2x"] is False
    assert got["steady_flooded_batch_max_s"] == [2.5, 1.2]
    assert got["steady_flooded_to_start_s"]["max"] == 1.0
    assert got["flood_answers"] == {"202": 3, "429": 27} and got["flood_accepted"] == 3
    assert got["flood_sent_per_s"] == 50.0 and got["flood_after_drain"] == {"ended": 3, "no_row": 0}
