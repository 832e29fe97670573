"""The `events` table: its columns, an event as a row and back, and the statements on it.

The one place that knows the table's shape. Writers (the archiver, `PostgresEventStore`)
derive the audit columns `tool_name` and `is_error` from the payload; readers (the
gateway, wake, verify, audit) rebuild the canonical event from the other columns. A row
that does not rebuild is a `CorruptEvent` naming its seq. The `EventStore` protocol is
what code above the table needs; `postgres_store.py` and `memory_store.py` implement it.
The sessions projection and the archiver's offsets are not here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import asyncpg

from wakeline.contract.events import CorruptEvent, Event, ToolCallRequested, ToolResultReceived, parse_event
from wakeline.contract.ids import CHAIN_HASH

Key = tuple[str, int]  # (session_id, seq): one position in one session's log

COLUMNS: tuple[tuple[str, str], ...] = (
    ("tenant", "text"), ("session_id", "text"), ("seq", "bigint"), ("event_id", "uuid"),
    ("causation_id", "text"), ("type", "text"), ("actor", "text"), ("trust", "text"),
    ("ts", "timestamptz"), ("prev_hash", "bytea"), ("hash", "bytea"), ("payload", "jsonb"),
    ("tool_name", "text"), ("is_error", "boolean"))
EVENT_COLUMNS = tuple(name for name, _ in COLUMNS)  # `event_row`'s order
DERIVED_COLUMNS = ("tool_name", "is_error")
# What a reader selects to rebuild (and re-hash) the event.
READ_COLUMNS = tuple(name for name in EVENT_COLUMNS if name not in DERIVED_COLUMNS)
# A chain hash is stored as its 32 bytes (0022) and leaves the database as the event
# carries it, 64 lowercase hex digits: every statement that reads one selects `hex_of(column)`.
HASH_COLUMNS = ("prev_hash", "hash")


def hex_of(column: str) -> str:
    """A stored hash column as the event's hex text, under the column's own name."""
    return f"encode({column}, 'hex') AS {column.rsplit('.', 1)[-1]}"


SELECT_LIST = ", ".join(hex_of(name) if name in HASH_COLUMNS else name for name in READ_COLUMNS)

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


def tool_name(event: Event) -> str | None:
    match event:
        case ToolCallRequested(payload=p) | ToolResultReceived(payload=p):
            return p.name
    return None


def is_error(event: Event) -> bool | None:
    match event:
        case ToolResultReceived(payload=p):
            return p.is_error
    return None


def hash_bytes(value: str) -> bytes:
    """The stored form of a chain hash. Only the form `chain.seal` makes is accepted: hex
    that is upper case or spaced would come back as other text than the event hashed."""
    if not CHAIN_HASH.fullmatch(value):
        raise ValueError(f"not a chain hash (64 lowercase hex digits): {value[:70]!r}")
    return bytes.fromhex(value)


def hash_text(value: bytes | str) -> str:
    """A hash as an event carries it, from what a row holds: the bytes `event_row` made (the
    memory store keeps those), or text already (a statement's `hex_of`, a planted value)."""
    return value.hex() if isinstance(value, bytes) else value


def event_row(event: Event) -> tuple[Any, ...]:
    """The `events` row in EVENT_COLUMNS order; the payload as JSON text for jsonb, the
    hashes as bytes for bytea."""
    return (event.tenant, event.session_id, event.seq, event.event_id, event.causation_id,
            event.type, event.actor, event.trust, event.ts, hash_bytes(event.prev_hash), hash_bytes(event.hash),
            event.payload.model_dump_json(), tool_name(event), is_error(event))


def event_from_row(row: Any) -> Event:
    """The event a row (READ_COLUMNS at least) holds; `CorruptEvent` if it holds none."""
    data: dict[str, Any] = dict(row)
    try:
        data["event_id"] = str(data["event_id"])
        for column in HASH_COLUMNS:
            if column in data:
                data[column] = hash_text(data[column])
        if isinstance(data["payload"], str):
            data["payload"] = json.loads(data["payload"])
        return parse_event(data)
    except (ValueError, KeyError) as err:  # pydantic's ValidationError is a ValueError
        raise CorruptEvent(str(err).splitlines()[0], data.get("seq")) from err


class Scope(NamedTuple):
    """Whose rows a read may return: a tenant, and for a `user` only the sessions it owns."""

    tenant: str
    viewer: str | None = None


@dataclass(frozen=True)
class EventQuery:
    """Events by position. With `before`, the `limit` events right before it (ascending)."""

    after: int | None = None
    before: int | None = None
    limit: int = 100
    types: tuple[str, ...] = ()


class Appended(NamedTuple):
    """What an append did with each event, by (session_id, seq)."""

    new: tuple[Key, ...]        # stored by this append
    present: tuple[Key, ...]    # already stored with the same hash: a redelivery, a no-op
    conflicts: tuple[Key, ...]  # already stored with another hash: refused, not stored


class EventStore(Protocol):
    async def append(self, events: Sequence[Event]) -> Appended: ...

    async def read(self, scope: Scope, session_id: str, query: EventQuery) -> list[Event]: ...

    async def first_caused_by(self, scope: Scope, session_id: str, causation_id: str) -> Event | None: ...

    async def first_caused_under(self, scope: Scope, session_id: str, key_id: str) -> Event | None: ...

    async def last_seq(self, scope: Scope, session_id: str) -> int: ...


def sort_out(events: Iterable[Event], stored: Mapping[Key, str]) -> tuple[list[Event], list[Key], list[Key]]:
    """(events to insert, keys already present, keys in conflict) given the stored hashes;
    a key twice in `events` counts its first occurrence as stored."""
    seen: dict[Key, str] = dict(stored)
    fresh: list[Event] = []
    present: list[Key] = []
    conflicts: list[Key] = []
    for event in events:
        key = (event.session_id, event.seq)
        known = seen.get(key)
        if known is None:
            seen[key] = event.hash
            fresh.append(event)
        elif known == event.hash:
            present.append(key)
        else:
            conflicts.append(key)
    return fresh, present, conflicts


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
