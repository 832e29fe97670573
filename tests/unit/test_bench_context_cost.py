"""`bench.context_cost` measures both ways on a real folded session and checks, at each
length, that the cached request is the whole build's (its own assertion)."""

from __future__ import annotations

from bench import context_cost


def test_the_bench_measures_both_ways_at_each_length() -> None:
    lines = context_cost.run(lengths=(3, 12), repeats=2)
    assert [line["steps"] for line in lines] == [3, 12]
    assert [line["messages"] for line in lines] == [7, 25]  # the task, then a call and its result a step
    assert all(line["whole_us"] > 0 and line["cached_us"] > 0 and line["ratio"] > 0 for line in lines)
    assert lines[1]["request_kb"] > lines[0]["request_kb"]
