"""A month of `events` that has closed gets its indexes rebuilt full: `wakeline pack-months`.

    wakeline pack-months [--after 2d] [--dry-run]      (as the schema owner)

Every index of `events` is written one row at a time as events arrive, and none of them is
filled from its right edge: sessions have random ids (`events_pkey` leads with the
session), and the audit indexes lead with (tenant, actor), (tenant, type) or (tenant, tool),
so each insert lands at the end of its own group, in the middle of the index, and every
page split there leaves half a page behind that nothing will fill again. Measured on 1M
events (`bench.storage_fresh`, docs/history/benchmarks.md) those indexes sit 50-70% full, about 375
bytes per event. A month whose range has ended (by `--after` more, for an archiver that is
behind) takes no more inserts, so its indexes can be built once, from sorted rows, with
every page full (`fillfactor` 100), and stay that way.

Each index is rebuilt with `REINDEX INDEX CONCURRENTLY`: reads and writes of `events` go on
(it takes SHARE UPDATE EXCLUSIVE on the one partition), the index stays attached to its
parent, and if the rebuild stops half way, Postgres leaves an invalid `<index>_ccnew` (or
`_ccold`) behind, which the next run drops before packing. An index counts as packed once
its rebuild has finished: only then does it get its comment (`PACKED`); the `fillfactor`
is set before the rebuild, which builds with it, so it cannot say whether the rebuild ran.
Runs are idempotent and an interrupted run resumes where it stopped. A month that never
stored a row has nothing to pack.

The rows themselves are not touched: the heap of an append-only table is already full, and
nothing here changes what any query returns (tests/integration/test_closed_months.py).
REINDEX needs the index's owner, so this runs as the schema owner, like `migrate`, not as
the maintenance role that drops months (`wakeline retention`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from wakeline.ops.retention import parse_window
from wakeline.runtime.settings import AdminSettings

# One packing run at a time (session-level, released when the connection closes).
_LOCK = "SELECT pg_advisory_lock(hashtext('wakeline.pack_months'))"
# Closed months of events that hold rows, with each index: its name, whether it is valid,
# whether it is packed already. Oldest month first.
_INDEXES = """
SELECT c.oid::regclass::text AS partition, b.range_to, i.indexrelid::regclass::text AS index,
       i.indisvalid AS valid, coalesce(obj_description(ic.oid, 'pg_class') = $2, false) AS packed,
       pg_relation_size(i.indexrelid) AS bytes
  FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
  CROSS JOIN LATERAL events_partition_bounds(c.oid::regclass) b
  JOIN pg_index i ON i.indrelid = c.oid JOIN pg_class ic ON ic.oid = i.indexrelid
 WHERE h.inhparent = 'public.events'::regclass AND b.range_to <= $1 AND pg_relation_size(c.oid) > 0
 ORDER BY b.range_to, ic.relname
"""
# The comment a packed index carries, set once its rebuild has finished.
PACKED = "wakeline pack-months: rebuilt with every page full"
# What an interrupted REINDEX CONCURRENTLY leaves: an invalid copy with this suffix.
_LEFTOVER_SUFFIXES = ("_ccnew", "_ccold")
FULL = 100


@dataclass(frozen=True)
class PackedIndex:
    partition: str
    index: str
    bytes_before: int
    bytes_after: int


def _is_leftover(index: str, valid: bool) -> bool:
    name = index.rsplit(".", 1)[-1].strip('"')
    return not valid and any(name.rstrip("0123456789").endswith(s) for s in _LEFTOVER_SUFFIXES)


async def plan(conn: asyncpg.Connection, now: datetime, after: timedelta) -> list[dict[str, Any]]:
    """Every index of every closed month that holds rows, as _INDEXES describes it."""
    return [dict(r) for r in await conn.fetch(_INDEXES, now - after, PACKED)]


async def pack_closed_months(dsn: str, now: datetime, after: timedelta = timedelta(days=2),
                             dry_run: bool = False) -> tuple[list[str], list[PackedIndex]]:
    """(leftovers dropped, indexes packed) for the months that ended `after` before `now`."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(_LOCK)
        indexes = await plan(conn, now, after)
        leftovers = [r["index"] for r in indexes if _is_leftover(r["index"], r["valid"])]
        todo = [r for r in indexes if r["valid"] and not r["packed"]]
        if dry_run:
            return leftovers, [PackedIndex(r["partition"], r["index"], r["bytes"], r["bytes"]) for r in todo]
        for index in leftovers:
            await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")
        packed = []
        for row in todo:
            # Storage parameter first: REINDEX builds with the index's fillfactor.
            await conn.execute(f"ALTER INDEX {row['index']} SET (fillfactor = {FULL})")
            await conn.execute(f"REINDEX INDEX CONCURRENTLY {row['index']}")
            await conn.execute(f"COMMENT ON INDEX {row['index']} IS '{PACKED}'")
            after_bytes = await conn.fetchval("SELECT pg_relation_size($1::regclass)", row["index"])
            packed.append(PackedIndex(row["partition"], row["index"], row["bytes"], after_bytes))
        return leftovers, packed
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wakeline pack-months", description=__doc__.split("\n\n")[0])
    parser.add_argument("--after", default="2d", help="how long after its end a month counts as closed (2d)")
    parser.add_argument("--dry-run", action="store_true", help="list what would be packed, change nothing")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        after = parse_window(args.after)
    except ValueError as exc:
        parser.error(str(exc))
    settings = AdminSettings()
    try:
        leftovers, packed = asyncio.run(pack_closed_months(settings.postgres_admin_dsn, datetime.now(UTC), after,
                                                           args.dry_run))
    except (asyncpg.PostgresError, OSError) as exc:
        print(f"pack-months: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for index in leftovers:
        print(json.dumps({"leftover_dropped": index, "dry_run": args.dry_run}))
    for item in packed:
        print(json.dumps({**asdict(item), "dry_run": args.dry_run}))
    before, after_total = sum(p.bytes_before for p in packed), sum(p.bytes_after for p in packed)
    print(f"pack-months: {len(packed)} indexes {'to pack' if args.dry_run else 'packed'}, "
          f"{before} bytes before" + ("" if args.dry_run else f", {after_total} after"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
