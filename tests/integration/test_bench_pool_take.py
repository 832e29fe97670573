"""The pool-take bench runs on the real Postgres: each round's take found what waits (the
bench asserts it), and the figures come back for nothing waiting and for calls waiting."""

from __future__ import annotations

import pytest

from bench import pool_take
from conftest_pg import require_postgres

pytestmark = [pytest.mark.postgres]


async def test_pool_take_bench_times_takes_that_found_what_waits() -> None:
    await require_postgres()
    idle, busy = await pool_take.run(waiting=20, rounds=3)
    assert (idle["bench"], idle["waiting"], idle["taken"], idle["n"]) == ("pool_take_ms", 0, 0, 3)
    assert (busy["bench"], busy["waiting"], busy["taken"], busy["n"]) == ("pool_take_ms", 20, pool_take.IN_FLIGHT, 3)
    for line in (idle, busy):
        assert 0 < line["min"] <= line["p50"] <= line["max"] < 60_000
