"""`bench.dbos_peer` runs the pinned DBOS in its own venv on a database of its own: every step
it ran is a stored row, each round is a measured window, and the database is gone afterwards
(figures, not timings). The first run makes the peer's venv (`.cache/dbos-venv`, from PyPI)."""

from __future__ import annotations

from bench import dbos_peer
from bench.harness import superuser
from conftest_pg import require_postgres
from wakeline.runtime.settings import CommonSettings


async def test_the_peer_stores_every_step_it_runs_measures_each_round_and_drops_its_database() -> None:
    await require_postgres()
    got = await dbos_peer.measure(workflows=2, steps=3, rounds=2, warm_up=1)
    assert got["dbos_version"] == dbos_peer.DBOS_VERSION
    assert got["stored"] == {"steps": (1 + 2 * 2) * 3, "workflows_succeeded": 1 + 2 * 2}
    assert got["expected_steps"] == got["stored"]["steps"]
    assert [r["steps"] for r in got["rounds"]] == [6, 6]
    assert all(r["window_s"] > 0 and "dbos" in r["cpu_ms_per_step"] and "machine" in r["cpu_ms_per_step"]
               for r in got["rounds"])
    conn = await superuser()
    try:
        assert not await conn.fetchval("SELECT count(*) FROM pg_database WHERE datname = $1",
                                       f"{CommonSettings().database}_dbos_peer")
    finally:
        await conn.close()
