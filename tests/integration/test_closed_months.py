"""`wakeline pack-months`: a closed month's indexes rebuilt full, nothing else changed.

On a database of its own (the shared one's months belong to other tests): a month in the
past written in random session order, as live sessions write it, then packed. Its indexes
are smaller and still attached to events' indexes; every row reads back as before and the
audit query reads a rebuilt index; a second run has nothing to do; a month that has not
closed (by `after`) is left alone; what an interrupted REINDEX CONCURRENTLY leaves behind is
dropped.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from conftest_pg import connected, database_before, new_event, require_postgres, row_values, set_tenant
from wakeline.ops import closed_months
from wakeline.ops.closed_months import pack_closed_months
from wakeline.storage.event_rows import EVENT_COLUMNS

pytestmark = pytest.mark.postgres

CLOSED = datetime(2030, 3, 1, tzinfo=UTC)  # March 2030: closed for a "now" in April
OPEN = datetime(2030, 4, 1, tzinfo=UTC)
NOW = datetime(2030, 4, 10, tzinfo=UTC)
LEFTOVER = "events_y2030m03_tenant_ts_idx_ccnew"
HALF_DONE = "events_y2030m03_tenant_actor_ts_idx"
INDEXES = """
SELECT ic.relname AS index, i.indisvalid AS valid, ic.reloptions AS options, pg_relation_size(ic.oid) AS bytes,
       obj_description(ic.oid, 'pg_class') AS comment,
       EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = ic.oid) AS attached
  FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
 WHERE i.indrelid = $1::regclass ORDER BY ic.relname
"""


async def _write_month(conn, tenant: str, month: datetime, sessions: int, per_session: int) -> None:
    """`sessions` sessions of `per_session` events, interleaved as concurrent sessions arrive."""
    ids = [str(uuid.uuid4()) for _ in range(sessions)]
    rng = random.Random(7)
    rows = []
    for step in range(per_session):
        for n, session in enumerate(rng.sample(ids, len(ids))):
            ts = month + timedelta(minutes=step * sessions + n)
            rows.append(row_values(new_event(tenant, session, step + 1, ts=ts, actor=f"user:u{n % 13}",
                                             type=("user_message", "model_turn", "tool_call")[step % 3])))
    placeholders = ", ".join(f"${n}" for n in range(1, len(EVENT_COLUMNS) + 1))
    async with conn.transaction():
        await set_tenant(conn, tenant)
        await conn.execute("SELECT ensure_events_partition($1)", month)
        await conn.executemany(f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) VALUES ({placeholders})", rows)


async def test_a_closed_month_is_packed_and_reads_back_the_same(tmp_path: Path) -> None:
    await require_postgres()
    tenant = "tenant-pack"
    async with database_before(10_000, tmp_path) as dsn:
        async with connected(dsn) as conn:
            await _write_month(conn, tenant, CLOSED, sessions=60, per_session=50)
            await _write_month(conn, tenant, OPEN, sessions=4, per_session=5)
            async with conn.transaction():
                await set_tenant(conn, tenant)
                rows_before = await conn.fetch("SELECT * FROM events ORDER BY session_id, seq")
            closed_before = {r["index"]: r for r in await conn.fetch(INDEXES, "events_y2030m03")}
            open_before = {r["index"]: r for r in await conn.fetch(INDEXES, "events_y2030m04")}
            # What a REINDEX CONCURRENTLY stopped half way leaves: an invalid copy named
            # <index>_ccnew. A concurrent build that fails leaves the same kind of index.
            with pytest.raises(asyncpg.UniqueViolationError):
                await conn.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {LEFTOVER} ON events_y2030m03 (tenant)")
            leftover_before = await conn.fetchrow(INDEXES.replace("ORDER BY", "AND ic.relname = $2 ORDER BY"),
                                                  "events_y2030m03", LEFTOVER)
            # A run stopped between setting the fillfactor and the rebuild: not packed yet.
            await conn.execute(f"ALTER INDEX {HALF_DONE} SET (fillfactor = 100)")

        leftovers, packed = await pack_closed_months(dsn, NOW, timedelta(days=2))
        again = await pack_closed_months(dsn, NOW, timedelta(days=2))

        async with connected(dsn) as conn:
            async with conn.transaction():
                await set_tenant(conn, tenant)
                rows_after = await conn.fetch("SELECT * FROM events ORDER BY session_id, seq")
                plan = "\n".join(r[0] for r in await conn.fetch(
                    "EXPLAIN SELECT * FROM events WHERE tenant = $1 AND actor = 'user:u3' AND ts >= $2 AND ts < $3 "
                    "ORDER BY ts LIMIT 10", tenant, CLOSED, OPEN))
            closed_after = {r["index"]: r for r in await conn.fetch(INDEXES, "events_y2030m03")}
            open_after = {r["index"]: r for r in await conn.fetch(INDEXES, "events_y2030m04")}

    assert rows_after == rows_before and len(rows_before) == 60 * 50 + 4 * 5
    assert {p.partition for p in packed} == {"events_y2030m03"}
    assert leftover_before is not None and not leftover_before["valid"]
    assert leftovers == [LEFTOVER]
    assert set(closed_after) == {p.index for p in packed} == set(closed_before) - {LEFTOVER}
    for name, index in closed_after.items():
        assert index["valid"] and index["attached"] and index["options"] == ["fillfactor=100"], index
        assert index["comment"] == closed_months.PACKED, index
        before = closed_before[name]["bytes"]
        # An index of one or two pages (the tool index: these events name no tool) has nothing to gain.
        assert index["bytes"] < before if before > 2 * 8192 else index["bytes"] <= before, (name, before, index)
    assert sum(p.bytes_after for p in packed) < 0.85 * sum(p.bytes_before for p in packed)
    assert open_after == open_before  # April has not closed: untouched
    assert again == ([], [])
    assert "Index Scan using events_y2030m03_tenant_" in plan, plan  # a rebuilt index, used


def test_the_command_refuses_a_window_of_nothing_and_a_dry_run_changes_nothing(capsys) -> None:
    with pytest.raises(SystemExit) as refused:
        closed_months.main(["--after", "0d"])
    assert refused.value.code == 2 and "positive window" in capsys.readouterr().err
    # The shared test database (other tests write months of 1100..1999): whatever is listed
    # is listed again, so nothing was packed.
    assert closed_months.main(["--dry-run"]) == 0
    first = capsys.readouterr()
    assert closed_months.main(["--dry-run"]) == 0
    assert capsys.readouterr() == first and first.err.startswith("pack-months: ") and "to pack" in first.err
