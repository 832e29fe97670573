"""`bench.scale` in its shortest form: the code runs and its lines say what they claim.

Not a timing test: sizes are tiny, and only the shapes and the counts are checked.
"""

from __future__ import annotations

import asyncio

from bench import scale
from tests.e2e.stack import require_database


def test_the_whole_loop_figures_count_every_event_of_every_session():
    require_database()
    (line,) = asyncio.run(scale.whole_loop((2,), timeout_s=120))
    assert line["bench"] == "scale_whole_loop" and line["sessions"] == 2
    # noop10: created, the message, ten turns of a call and its result, the final turn, ended.
    assert line["events"] == 2 * 56
    assert line["tool_round_trip_ms"]["n"] == 2 * 10
    assert set(line["cpu_ms_per_event"]) == {"archiver", "runner", "brain"}
    assert all(ms > 0 for ms in line["cpu_ms_per_event"].values())
    # measured only once the archive held every committed event of the topic
    assert line["archive_caught_up"]["bench"] == "archive_caught_up" and line["archive_caught_up"]["waited_s"] >= 0


def test_runner_scaling_reports_a_rate_per_runner_count():
    require_database()
    line = asyncio.run(scale.runner_scaling((1, 2), sessions=2, timeout_s=120))
    assert set(line["calls_per_s"]) == {1, 2}
    assert all(rate > 0 for rate in line["calls_per_s"].values())
    assert line["ratio_to_one"][1] == 1.0
