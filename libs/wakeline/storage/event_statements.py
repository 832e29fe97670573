"""The statements on the `events` table and its `event_keys` registry, and the functions that run them.

Each runs on the caller's connection, inside the caller's transaction and with its tenant
set: `PostgresEventStore`, the archiver's batch, a wake's read. The columns and the row
mapping are event_rows.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from wakeline.contract.events import Event
from wakeline.storage.event_rows import COLUMNS, EVENT_COLUMNS, SELECT_LIST, event_from_row, event_row, hex_of
from wakeline.storage.event_store import EventQuery, Key

# Set-based: one statement per group of rows, whatever its size.
INSERT_ROWS = (f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) SELECT * FROM unnest("
               + ", ".join(f"${n}::{sql_type}[]" for n, (_, sql_type) in enumerate(COLUMNS, 1)) + ")")
# RETURNING says which rows a concurrent writer had not already stored.
INSERT_EVENTS = INSERT_ROWS + " ON CONFLICT DO NOTHING RETURNING session_id, seq"
# Only how many: for a writer that checks what it skipped itself (the archiver).
INSERT_NEW_EVENTS = INSERT_ROWS + " ON CONFLICT DO NOTHING"
STORED_HASHES = f"""
SELECT k.session_id, k.seq, {hex_of('k.hash')} FROM event_keys AS k
JOIN unnest($1::text[], $2::bigint[]) AS b(session_id, seq) USING (session_id, seq)
"""
# The same, by runs of seqs (session_id, first, last): one index range per run, not a probe per key.
STORED_HASHES_BETWEEN = f"""
SELECT k.session_id, k.seq, {hex_of('k.hash')}
FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS b(session_id, lo, hi)
JOIN event_keys AS k ON k.session_id = b.session_id AND k.seq BETWEEN b.lo AND b.hi
"""
SELECT_SESSION = f"SELECT {SELECT_LIST} FROM events WHERE session_id = $1 ORDER BY seq"
SELECT_FIRST_CAUSED_BY = (f"SELECT {SELECT_LIST} FROM events WHERE session_id = $1 AND causation_id = $2 "
                          "ORDER BY seq LIMIT 1")
# A keyed command's id is the key id, a dot and a hash (the gateway's idempotency.py).
SELECT_FIRST_CAUSED_UNDER = (f"SELECT {SELECT_LIST} FROM events WHERE session_id = $1 "
                             "AND (causation_id = $2 OR starts_with(causation_id, $2 || '.')) ORDER BY seq LIMIT 1")
SELECT_LAST_SEQ = "SELECT coalesce(max(seq), 0) FROM events WHERE session_id = $1"
# A wake's read: the newest snapshot, then it and what follows (the whole log without one).
# The (session_id, seq) key read backwards finds the snapshot within the snapshot cadence;
# two statements, so the second's seq bound is a parameter the index condition can use
# (folded into one, the bound came from a sub-plan and was only a filter over every row).
SELECT_NEWEST_SNAPSHOT = ("SELECT seq FROM events WHERE session_id = $1 AND type = 'snapshot' "
                          "ORDER BY seq DESC LIMIT 1")
SELECT_SESSION_FROM = f"SELECT {SELECT_LIST} FROM events WHERE session_id = $1 AND seq >= $2 ORDER BY seq"


def select_events(session_id: str, query: EventQuery) -> tuple[str, list[Any]]:
    """One session's events by position; with `before` in descending order (reverse them)."""
    where: list[str] = ["session_id = $1"]
    args: list[Any] = [session_id]
    for clause, value in (("seq > ${}", query.after), ("seq < ${}", query.before),
                          ("type = ANY(${}::text[])", list(query.types) or None)):
        if value is not None:
            args.append(value)
            where.append(clause.format(len(args)))
    order = "DESC" if query.before is not None else "ASC"
    args.append(query.limit)
    return (f"SELECT {SELECT_LIST} FROM events WHERE {' AND '.join(where)} "
            f"ORDER BY seq {order} LIMIT ${len(args)}"), args


async def insert_events(conn: asyncpg.Connection, events: Sequence[Event]) -> set[Key]:
    """Inserts the events (their tenant set on `conn`) in one statement; the keys it stored."""
    if not events:
        return set()
    columns = list(zip(*(event_row(e) for e in events)))
    return {(r["session_id"], r["seq"]) for r in await conn.fetch(INSERT_EVENTS, *columns)}


async def insert_new_events(conn: asyncpg.Connection, events: Sequence[Event]) -> int:
    """`insert_events` without saying which: how many of the events it stored."""
    if not events:
        return 0
    status = await conn.execute(INSERT_NEW_EVENTS, *zip(*(event_row(e) for e in events)))
    return int(status.rsplit(" ", 1)[1])  # "INSERT 0 <rows>"


async def stored_hashes(conn: asyncpg.Connection, keys: Sequence[Key]) -> dict[Key, str]:
    """The registered hash (event_keys) of each of `keys` that is stored."""
    rows = await conn.fetch(STORED_HASHES, [session_id for session_id, _ in keys], [seq for _, seq in keys])
    return {(r["session_id"], r["seq"]): r["hash"] for r in rows}


async def stored_hashes_between(conn: asyncpg.Connection, runs: Sequence[tuple[str, int, int]]) -> dict[Key, str]:
    """The registered hash of every stored key within the (session_id, first seq, last seq) runs."""
    rows = await conn.fetch(STORED_HASHES_BETWEEN, *(list(column) for column in zip(*runs))) if runs else []
    return {(r["session_id"], r["seq"]): r["hash"] for r in rows}


async def session_events(conn: asyncpg.Connection, session_id: str) -> list[Event]:
    """Every stored event of the session, in seq order, in `conn`'s snapshot."""
    return [event_from_row(r) for r in await conn.fetch(SELECT_SESSION, session_id)]


async def events_from_snapshot(conn: asyncpg.Connection, session_id: str) -> list[Event]:
    """The session's newest stored `snapshot` event and every event after it, in seq order
    (all of them if it has none): what `wakeline.log.snapshots.resume` folds."""
    # Two statements, not one with the snapshot's seq as a sub-select: with that, the planner
    # no longer uses `seq >=` as an index bound and reads the whole session, filtering (a
    # 100k-event wake went from 50 to 126 ms in `make bench`, 2026-12-02).
    start = await conn.fetchval(SELECT_NEWEST_SNAPSHOT, session_id) or 1
    return [event_from_row(r) for r in await conn.fetch(SELECT_SESSION_FROM, session_id, start)]
