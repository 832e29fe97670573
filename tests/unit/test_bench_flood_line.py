"""`bench.flood`'s figure lines, pure: the ratio to the quiet run, the 2x mark, where the
flooded sessions' time went, and the median of several runs per plan."""

from __future__ import annotations

from collections import Counter

from bench.flood import Flood, Plan, Timed, line, medians


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


def test_the_median_line_takes_each_plans_runs_apart_and_counts_the_lost() -> None:
    quiet = [Timed(1.0, 0.1)] * 10
    runs = [line(Plan(), quiet, [[Timed(end, 0.1)] * 10], Flood(), Counter(), {"ended": 3, "no_row": lost})
            for end, lost in ((2.4, 0), (1.2, 1), (1.9, 0))]
    paced = line(Plan(admission="paced"), quiet, [[Timed(3.0, 0.1)] * 10], Flood(), Counter(), {"no_row": 0})
    burst, once = medians([runs[0], paced, *runs[1:]])
    assert (burst["admission"], burst["runs"], burst["p99_ratios"]) == ("burst", 3, [2.4, 1.2, 1.9])
    assert burst["p99_ratio"] == 1.9 and burst["p99_within_2x"] is True and burst["lost"] == 1
    assert (once["admission"], once["runs"], once["p99_ratio"], once["p99_within_2x"]) == ("paced", 1, 3.0, False)
