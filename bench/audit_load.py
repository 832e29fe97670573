"""Loads the audit benchmark's tenant once: 20k sessions × 50 events (1M) across 2026.

Written as the service role through `TenantPool`, like the archiver: COPY is refused on a
table under row-level security, so each batch is one `INSERT … SELECT FROM unnest(…)`,
and the key-registry trigger runs per row as it does in production. Two writers take
alternate batches; each generates its rows in a thread while the other's insert runs.
Rows come from fixed seeds, so a second run finds the tenant complete and skips, and an
interrupted load resumes: a batch is one transaction, and a batch whose first session is
stored is skipped. The `sessions` projection is not written; audit reads do not use it.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone

from bench.audit_sessions import PER_SESSION, session_id, session_rows
from bench.harness import superuser
from wakeline.log.chain import first_broken_seq
from wakeline.storage.event_rows import EVENT_COLUMNS, READ_COLUMNS, event_from_row
from wakeline.storage.event_statements import INSERT_ROWS
from wakeline.storage.pg import TenantPool

TENANT = "bench-audit"
SESSIONS = 20_000
BATCH_SESSIONS = 200
WRITERS = 2  # one insert per core while the other batch's rows are generated


ARRIVAL_BATCH = 10_000


async def ensure_loaded(dsn: str, sessions: int = SESSIONS, order: str = "sessions") -> dict:
    """Loads what is missing; the figures say whether this run loaded and how long it took.

    `order` "sessions" writes 200 whole sessions per insert (each session's times start at a
    random moment of the year, so time-keyed indexes are written in random order);
    "arrival" writes every event in `ts` order, `ARRIVAL_BATCH` per insert, as the archiver
    stores a live log (`bench.storage_fresh` measures both)."""
    async with TenantPool(dsn, min_size=1, max_size=WRITERS) as pool:
        wanted = sessions * PER_SESSION
        present = await count_events(pool)
        if present >= wanted:
            return {"loaded": False, "events": present}
        check_chains()
        async with pool.transaction(TENANT) as conn:
            for month in range(1, 13):
                await conn.execute("SELECT ensure_events_partition($1)", datetime(2026, month, 1, tzinfo=timezone.utc))
        started = time.perf_counter()
        if order == "arrival":
            rows = await asyncio.to_thread(_in_arrival_order, sessions)
            batches = [rows[at:at + ARRIVAL_BATCH] for at in range(0, len(rows), ARRIVAL_BATCH)]
            await asyncio.gather(*(_write_rows(pool, batches[n::WRITERS]) for n in range(WRITERS)))
        else:
            batches = [(first, min(first + BATCH_SESSIONS, sessions)) for first in range(0, sessions, BATCH_SESSIONS)]
            await asyncio.gather(*(_write(pool, batches[n::WRITERS]) for n in range(WRITERS)))
        loaded_s = time.perf_counter() - started
        vacuumed_s = await _vacuum_analyze()
        return {"loaded": True, "events": await count_events(pool), "load_s": round(loaded_s, 1),
                "events_per_s": round((wanted - present) / loaded_s), "vacuum_analyze_s": round(vacuumed_s, 1)}


# Every byte an archived event costs: the events partitions with their indexes and TOAST,
# the key registries (event_keys, session_keys), and the sessions projection's share.
_STORAGE = """
WITH parts AS (SELECT inhrelid AS oid FROM pg_inherits WHERE inhparent = 'public.events'::regclass),
rels AS (SELECT oid, 'events' AS part FROM parts
         UNION ALL SELECT 'public.event_keys'::regclass, 'event_keys'
         UNION ALL SELECT 'public.session_keys'::regclass, 'session_keys'
         UNION ALL SELECT 'public.sessions'::regclass, 'sessions')
SELECT part, sum(pg_total_relation_size(oid))::bigint AS total, sum(pg_relation_size(oid))::bigint AS heap,
       sum(pg_total_relation_size(oid) - pg_relation_size(oid) - pg_indexes_size(oid))::bigint AS toast
FROM rels GROUP BY part
"""
# Index sizes summed over partitions by the parent's index name (events_y2026m03_pkey -> pkey).
_INDEXES = """
SELECT coalesce(pi.relname, i.relname) AS name, sum(pg_relation_size(i.oid))::bigint AS bytes
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
LEFT JOIN pg_inherits h ON h.inhrelid = i.oid LEFT JOIN pg_class pi ON pi.oid = h.inhparent
WHERE x.indrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'public.events'::regclass)
   OR x.indrelid IN ('public.event_keys'::regclass, 'public.session_keys'::regclass, 'public.sessions'::regclass)
GROUP BY 1 ORDER BY 2 DESC
"""


async def storage_per_event() -> dict:
    """Bytes per archived event over the whole database (every tenant): heap, TOAST and
    every index of `events`, `event_keys` (one row per event ever archived), `session_keys` (one per
    session) and `sessions`."""
    conn = await superuser()
    try:
        events = await conn.fetchval("SELECT count(*) FROM event_keys")
        parts = {r["part"]: dict(r) for r in await conn.fetch(_STORAGE)}
        indexes = {r["name"]: r["bytes"] for r in await conn.fetch(_INDEXES)}
    finally:
        await conn.close()
    total = sum(p["total"] for p in parts.values())
    return {"bench": "storage_per_event", "events": events,
            "bytes_per_event": round(total / events, 1) if events else None,
            "heap_per_event": {k: round(p["heap"] / events, 1) for k, p in parts.items()} if events else {},
            "toast_per_event": round(sum(p["toast"] for p in parts.values()) / events, 1) if events else None,
            "index_per_event": {k: round(v / events, 1) for k, v in indexes.items()} if events else {}}


async def count_events(pool: TenantPool) -> int:
    async with pool.transaction(TENANT) as conn:
        return await conn.fetchval("SELECT count(*) FROM events WHERE tenant = $1", TENANT)


def check_chains(sessions: int = 20) -> None:
    """The hashes computed in audit_sessions must be the chain's own: re-checked with wakeline.log.chain."""
    for index in range(sessions):
        rows = [{c: v for c, v in zip(EVENT_COLUMNS, row) if c in READ_COLUMNS} for row in session_rows(TENANT, index)]
        broken = first_broken_seq([event_from_row(row) for row in rows])
        if broken is not None:
            raise AssertionError(f"bench session {index} breaks its chain at seq {broken}")


async def _write(pool: TenantPool, batches: list[tuple[int, int]]) -> None:
    """Each batch is one transaction, so a batch whose first session is stored is stored whole."""
    for first, last in batches:
        async with pool.transaction(TENANT) as conn:
            if await conn.fetchval("SELECT 1 FROM event_keys WHERE session_id = $1", session_id(first)):
                continue
        columns = await asyncio.to_thread(_columns, first, last)
        async with pool.transaction(TENANT) as conn:
            await conn.execute(INSERT_ROWS, *columns)


def _in_arrival_order(sessions: int) -> list[tuple]:
    ts = EVENT_COLUMNS.index("ts")
    return sorted((row for index in range(sessions) for row in session_rows(TENANT, index)), key=lambda r: r[ts])


async def _write_rows(pool: TenantPool, batches: list[list[tuple]]) -> None:
    """As `_write`, for batches of rows in arrival order: one stored row means its batch is."""
    for rows in batches:
        async with pool.transaction(TENANT) as conn:
            first = rows[0]
            if await conn.fetchval("SELECT 1 FROM event_keys WHERE session_id = $1 AND seq = $2", first[1], first[2]):
                continue
            await conn.execute(INSERT_ROWS, *[list(column) for column in zip(*rows)])


def _columns(first: int, last: int) -> list[list]:
    rows = [row for index in range(first, last) for row in session_rows(TENANT, index)]
    return [list(column) for column in zip(*rows)]


async def _vacuum_analyze() -> float:
    """Planner statistics and the visibility map as a settled table would have them.

    Needs the owner or a superuser; the bench's raw connection is the superuser's."""
    conn = await superuser()
    try:
        started = time.perf_counter()
        await conn.execute("VACUUM (ANALYZE) events")
        return time.perf_counter() - started
    finally:
        await conn.close()
