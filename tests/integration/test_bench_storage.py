"""`bench.storage_fresh` runs: a small load in arrival order on a database of its own, measured
as written and after `pack-months`, and the database is gone afterwards (figures, not timings)."""

from __future__ import annotations

from bench import storage_fresh
from bench.harness import superuser
from conftest_pg import require_postgres


async def test_the_storage_bench_loads_measures_packs_and_drops_its_database() -> None:
    await require_postgres()
    before = await _databases()
    line = await storage_fresh.measure("arrival", sessions=60)
    assert line["events"] == 60 * 50 and line["load"]["loaded"] and line["order"] == "arrival"
    assert line["schema"] >= "0024_packed_partitions"
    packed = line["after_pack_months"]
    assert packed["months"] >= 1 and packed["indexes_packed"] >= 5 * packed["months"]
    assert packed["bytes_per_event"] < line["bytes_per_event"]
    assert await _databases() == before


async def _databases() -> set[str]:
    conn = await superuser()
    try:
        rows = await conn.fetch("SELECT datname FROM pg_database WHERE datname LIKE 'wakeline_storage_%'")
        return {r[0] for r in rows}
    finally:
        await conn.close()
