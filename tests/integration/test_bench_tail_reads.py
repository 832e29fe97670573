"""The tail-read bench runs: each figure comes back beside its floor, with the constants it
is read against (not timings: the behaviour is test_brain_tail_reads.py's)."""

from __future__ import annotations

import pytest

from bench import tail_reads
from wakeline.transport.kafka_io import RANGE_FETCH_WAIT_MS, RANGE_POLL_MS
from wakeline.runtime.settings import CommonSettings


async def test_tail_read_bench_reports_the_look_up_and_the_aborted_read_beside_their_floors(
        kafka: CommonSettings) -> None:
    lookup, aborted = await tail_reads.run(repeats=2)
    assert (lookup["bench"], lookup["n"], lookup["fetch_wait_ms"]) == ("tail_lookup_ms", 2, RANGE_FETCH_WAIT_MS)
    assert (aborted["bench"], aborted["n"], aborted["poll_ms"]) == ("aborted_tail_read_ms", 2, RANGE_POLL_MS)
    for line in (lookup, aborted):
        assert 0 < line["min"] <= line["p50"] <= line["p99"] <= line["max"] < 60_000
        assert line["floor_p50"] > 0
        assert line["over_floor_ms"] == pytest.approx(line["p50"] - line["floor_p50"], abs=0.002)
