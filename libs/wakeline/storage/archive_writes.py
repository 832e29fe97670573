"""The archiver's writes in Postgres: a batch of events, the sessions rows it moves, its offsets.

`PostgresEventStore.archive` runs `store_batch` in one transaction holding, per tenant in
the batch (RLS needs `wakeline.tenant` set before touching its rows), the new events, the
`sessions` rows they move forward, and, last, the batch's Kafka offsets in
`archiver_offsets`. Either all of it commits or none, so the stored offset always says
exactly how far the archive goes. What the archive accepts is `archive_rules`' (the
in-memory store applies the same rules). Parking a session (`archiver_quarantine`, 0010)
commits with the offsets of the batch that parked it.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Sequence

import asyncpg

from wakeline.contract.events import Event, SessionCreated, SessionForked
from wakeline.log.status import SESSION_COLUMNS, SessionRow
from wakeline.storage.archive_rules import (
    Month, check_skipped, project_sessions, refuse_retained_out, runs_to_look_up, select_new,
)
from wakeline.storage.event_statements import insert_new_events, stored_hashes, stored_hashes_between
from wakeline.storage.event_store import Offsets, ParkedSession

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
PARKED = """
SELECT q.tenant, q.session_id, q.from_seq, q.reason, q.topic, q.partition, q."offset"
FROM archiver_quarantine AS q JOIN unnest($1::text[], $2::text[]) AS b(tenant, session_id) USING (tenant, session_id)
"""
PARK = """
INSERT INTO archiver_quarantine (tenant, session_id, from_seq, reason, topic, partition, "offset", consumer_group)
SELECT *, $8::text FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::int[], $7::bigint[])
ON CONFLICT (tenant, session_id) DO NOTHING
"""


async def store_batch(conn: asyncpg.Connection, group: str, events: Sequence[Event], offsets: Offsets,
                      dropped: Collection[Month]) -> int:
    """The batch and its offsets on `conn` (in one transaction); how many events were new."""
    stored = 0
    # One lock order for every archiver: two that overlap during a rebalance then
    # wait for each other instead of deadlocking. A session's events stay in seq order.
    ordered = sorted(events, key=lambda e: (e.tenant, e.session_id, e.seq))
    for tenant, group_of_tenant in itertools.groupby(ordered, lambda e: e.tenant):
        await conn.execute(SET_TENANT, tenant)
        stored += await _store_tenant_events(conn, list(group_of_tenant), dropped)
    await save_offsets(conn, group, offsets)
    return stored


async def _store_tenant_events(conn: asyncpg.Connection, events: list[Event], dropped: Collection[Month]) -> int:
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
    """Folds the inserted events over their sessions' current rows (`archive_rules.project_sessions`)
    and writes the rows that moved: two statements for the tenant's whole share."""
    # A session_created (or a fork's forked) inserted now means nothing of its session was
    # archived before: no row to read.
    opened = {e.session_id for e in events if isinstance(e, (SessionCreated, SessionForked))}
    known = sorted({e.session_id for e in events} - opened)
    current = {r["session_id"]: SessionRow(**r) for r in await conn.fetch(LOCK_SESSIONS, known)} if known else {}
    rows = sorted(project_sessions(current, events), key=lambda r: r.session_id)
    if rows:
        await conn.execute(UPSERT_SESSIONS, *([getattr(r, c) for r in rows] for c in SESSION_COLUMNS))


async def save_offsets(conn: asyncpg.Connection, group: str, offsets: Offsets) -> None:
    """Upserts the next offset per (topic, partition); never moves one backwards."""
    if offsets:
        keys = sorted(offsets)
        await conn.execute(SAVE_OFFSETS, group, [t for t, _ in keys], [p for _, p in keys], [offsets[k] for k in keys])


async def stored_positions(conn: asyncpg.Connection, group: str, topics: Iterable[str]) -> Offsets:
    rows = await conn.fetch(STORED_POSITIONS, group, list(topics))
    return {(r["topic"], r["partition"]): r["next_offset"] for r in rows}


async def find_parked(conn: asyncpg.Connection, sessions: Sequence[tuple[str, str]]) -> list[ParkedSession]:
    rows = await conn.fetch(PARKED, [tenant for tenant, _ in sessions], [sid for _, sid in sessions])
    return [ParkedSession(r["tenant"], r["session_id"], r["from_seq"], r["reason"], r["topic"], r["partition"],
                          r["offset"]) for r in rows]


async def park(conn: asyncpg.Connection, group: str, parked: Sequence[ParkedSession], offsets: Offsets) -> None:
    if parked:
        await conn.execute(PARK, *zip(*parked), group)
    await save_offsets(conn, group, offsets)
