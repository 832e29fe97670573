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

from wakeline.storage.event_statements import insert_new_events, stored_hashes, stored_hashes_between
from wakeline.contract.events import Event, SessionCreated, SessionForked
from wakeline.storage.pg import TenantPool
from wakeline.storage.retention_cuts import RETAINED_OUT_SQLSTATE
from wakeline.log.status import SESSION_COLUMNS, SessionRow
from wakeline_archiver.conflict import (
    Month, check_skipped, refuse_retained_out, runs_to_look_up, select_new, utc_month,
)
from wakeline_archiver.rows import project_sessions

SET_TENANT = "SELECT set_config('wakeline.tenant', $1, true)"
# The rows the batch moves forward, locked in one order: an archiver overlapping this one
# in a rebalance waits here rather than fold the same sessions from the same old rows.
LOCK_SESSIONS = (f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE session_id = ANY($1::text[]) "
                 "ORDER BY session_id FOR UPDATE")
_SESSION_TYPES = ("text", "text", "text", "text", "text", "text", "bigint", "text", "timestamptz", "timestamptz",
                  "text", "text", "bigint", "timestamptz", "text", "int")
_SESSION_CHANGES = ("title", "status", "last_seq", "last_hash", "updated_at", "ended_reason", "deleted_at",
                    "deleted_by", "pending_client")
# Forward only: a redelivered or older batch never regresses a row. What a session is
# (tenant, owner, model, created_at, fork) is written once, by the insert.
UPSERT_SESSIONS = (
    f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)}) SELECT * FROM unnest("
    + ", ".join(f"${i}::{t}[]" for i, t in enumerate(_SESSION_TYPES, 1))
    + ") ON CONFLICT (session_id) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in _SESSION_CHANGES)
    + " WHERE sessions.last_seq < EXCLUDED.last_seq")
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
    fresh = select_new(events, await stored_hashes_between(conn, runs_to_look_up(events)))
    refuse_retained_out(fresh, dropped)
    if not fresh:
        return 0
    # One statement for the whole group; what it did not insert, a concurrent archiver
    # (the previous owner of a partition, mid-rebalance) had already stored and
    # committed (the insert waits for it), so it must hold the same hashes; its
    # projection is then already in the rows `_project_sessions` reads, forward only.
    inserted = await insert_new_events(conn, fresh)
    if inserted < len(fresh):
        check_skipped(fresh, await stored_hashes(conn, [(e.session_id, e.seq) for e in fresh]))
    await _project_sessions(conn, fresh)
    return inserted


async def _project_sessions(conn: asyncpg.Connection, events: list[Event]) -> None:
    """Folds the inserted events over their sessions' current rows (`wakeline.log.status.advance`)
    and writes the rows that moved: two statements for the tenant's whole share."""
    if not events:
        return
    # A session_created (or a fork's forked) inserted now means nothing of its session was
    # archived before: no row to read.
    opened = {e.session_id for e in events if isinstance(e, (SessionCreated, SessionForked))}
    known = sorted({e.session_id for e in events} - opened)
    current = {r["session_id"]: SessionRow(**r) for r in await conn.fetch(LOCK_SESSIONS, known)} if known else {}
    rows = sorted(project_sessions(current, events), key=lambda r: r.session_id)
    if rows:
        await conn.execute(UPSERT_SESSIONS, *([getattr(r, c) for r in rows] for c in SESSION_COLUMNS))


async def save_offsets(conn: asyncpg.Connection, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Upserts the next offset per (topic, partition); never moves one backwards."""
    if offsets:
        keys = sorted(offsets)
        await conn.execute(SAVE_OFFSETS, group, [t for t, _ in keys], [p for _, p in keys], [offsets[k] for k in keys])
