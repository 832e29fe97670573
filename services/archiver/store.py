"""Postgres side of the archiver: one transaction per batch of events.

The transaction holds, per tenant in the batch (RLS needs `wakeline.tenant` set before
touching its rows), the new events, the `sessions` rows they move forward, and, last,
the batch's Kafka offsets in `archiver_offsets`. Either all of it commits or none, so
the stored offset always says exactly how far the archive goes. Monthly partitions of
`events` are created beforehand in their own short transactions: DDL must not hold
locks for the length of a batch. A month retention dropped is not created again (the
database refuses, 0007); events replayed into it can only be redeliveries.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import asyncpg

from wakeline.event_store import insert_events, stored_hashes
from wakeline.events import Event
from wakeline.pg import TenantPool
from wakeline.retention_cuts import RETAINED_OUT_SQLSTATE
from wakeline_archiver.conflict import (
    Month, check_skipped, keys_to_look_up, refuse_retained_out, select_new, utc_month,
)
from wakeline_archiver.rows import SESSION_COLUMNS, session_change, session_row

SET_TENANT = "SELECT set_config('wakeline.tenant', $1, true)"
INSERT_SESSION = (
    f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)}) VALUES "
    f"({', '.join(f'${i}' for i in range(1, len(SESSION_COLUMNS) + 1))}) ON CONFLICT (session_id) DO NOTHING")
# Forward only: a redelivered or older event never regresses the row. In SET every
# `s.` is the row before this event; status is derived the way wakeline.fold does.
UPDATE_SESSION = """
UPDATE sessions AS s SET
  last_seq = $2, last_hash = $3, updated_at = $4,
  ended_reason = CASE WHEN $6::boolean THEN $7::text ELSE s.ended_reason END,
  status = CASE WHEN s.deleted_by IS NOT NULL OR $9::text IS NOT NULL THEN 'deleted'
                WHEN (CASE WHEN $6::boolean THEN $7::text ELSE s.ended_reason END) IS NOT NULL THEN 'ended'
                WHEN COALESCE($5::boolean, s.status = 'running') THEN 'running'
                ELSE 'idle' END,
  title = COALESCE($8::text, s.title),
  deleted_by = COALESCE(s.deleted_by, $9::text),
  deleted_at = CASE WHEN s.deleted_by IS NULL AND $9::text IS NOT NULL THEN $4 ELSE s.deleted_at END
WHERE s.session_id = $1 AND s.last_seq < $2
"""
SAVE_OFFSETS = """
INSERT INTO archiver_offsets (consumer_group, topic, partition, next_offset, updated_at)
SELECT $1, t, p, o, now() FROM unnest($2::text[], $3::int[], $4::bigint[]) AS x(t, p, o)
ON CONFLICT (consumer_group, topic, partition) DO UPDATE
SET next_offset = GREATEST(archiver_offsets.next_offset, EXCLUDED.next_offset), updated_at = now()
"""
STORED_POSITIONS = """
SELECT topic, partition, next_offset FROM archiver_offsets
WHERE consumer_group = $1 AND topic = ANY($2::text[])
"""


class Archive:
    def __init__(self, pool: TenantPool, group: str):
        self._pool = pool
        self._group = group
        self._months: set[Month] = set()
        self._dropped: set[Month] = set()  # by retention: never created again

    async def store_events(self, events: Sequence[Event], offsets: dict[tuple[str, int], int]) -> int:
        """Stores the batch and its offsets in one transaction; returns how many events were new."""
        await self._ensure_partitions(events)
        stored = 0
        # One lock order for every archiver: two that overlap during a rebalance then
        # wait for each other instead of deadlocking. A session's events stay in seq order.
        ordered = sorted(events, key=lambda e: (e.tenant, e.session_id, e.seq))
        async with self._pool.system_transaction() as conn:
            for tenant, group in itertools.groupby(ordered, lambda e: e.tenant):
                await conn.execute(SET_TENANT, tenant)
                stored += await _store_tenant_events(conn, list(group), self._dropped)
            await save_offsets(conn, self._group, offsets)
        return stored

    async def stored_positions(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the next offset to archive, for every partition stored."""
        async with self._pool.system_transaction() as conn:
            rows = await conn.fetch(STORED_POSITIONS, self._group, list(topics))
        return {(r["topic"], r["partition"]): r["next_offset"] for r in rows}

    async def _ensure_partitions(self, events: Iterable[Event]) -> None:
        for event in events:
            month = utc_month(event.ts)
            if month in self._months or month in self._dropped:
                continue
            try:
                async with self._pool.system_transaction() as conn:
                    await conn.execute("SELECT ensure_events_partition($1)", event.ts)
            except asyncpg.PostgresError as exc:
                if exc.sqlstate != RETAINED_OUT_SQLSTATE:
                    raise
                self._dropped.add(month)
            else:
                self._months.add(month)


async def _store_tenant_events(conn: asyncpg.Connection, events: list[Event], dropped: set[Month]) -> int:
    """One tenant's share of the batch, in (session_id, seq) order."""
    fresh = select_new(events, await stored_hashes(conn, keys_to_look_up(events)))
    refuse_retained_out(fresh, dropped)
    if not fresh:
        return 0
    # One statement for the whole group; what it did not insert, a concurrent archiver
    # (the previous owner of a partition, mid-rebalance) had already stored.
    inserted = await insert_events(conn, fresh)
    skipped = [e for e in fresh if (e.session_id, e.seq) not in inserted]
    if skipped:
        check_skipped(skipped, await stored_hashes(conn, [(e.session_id, e.seq) for e in skipped]))
    await _project_sessions(conn, [e for e in fresh if (e.session_id, e.seq) in inserted])
    return len(inserted)


async def _project_sessions(conn: asyncpg.Connection, events: list[Event]) -> None:
    created = [session_row(e) for e in events if e.type == "session_created"]
    if created:
        await conn.executemany(INSERT_SESSION, created)
    changes = [session_change(e) for e in events if e.type != "session_created"]
    if changes:
        await conn.executemany(UPDATE_SESSION, [
            (c.session_id, c.seq, c.hash, c.ts, c.in_turn, c.sets_ended_reason, c.ended_reason, c.title,
             c.deleted_by)
            for c in changes])


async def save_offsets(conn: asyncpg.Connection, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Upserts the next offset per (topic, partition); never moves one backwards."""
    if offsets:
        keys = sorted(offsets)
        await conn.execute(SAVE_OFFSETS, group, [t for t, _ in keys], [p for _, p in keys], [offsets[k] for k in keys])
