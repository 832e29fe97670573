"""The gateway's reads from Postgres: the sessions projection and the events of one session.

Every query runs in a `TenantPool.transaction(tenant)`, so row-level security decides what
a caller sees; the gateway never writes here. Events come back as the canonical models
(`wakeline.events.parse_event`), exactly as the brain sealed them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import asyncpg
from pydantic import ValidationError

from wakeline import keys, verify
from wakeline.checkpoints import Checkpoint
from wakeline.events import Event, parse_event
from wakeline.pg import TenantPool

SESSION_COLUMNS = ("session_id, owner, title, model, status, last_seq, created_at, updated_at, "
                   "ended_reason, parent_session_id, fork_seq, deleted_at, deleted_by")
EVENT_COLUMNS = ("tenant, session_id, seq, event_id, causation_id, type, actor, trust, ts, "
                 "prev_hash, hash, payload")
PAGE = 1000


class Scope(NamedTuple):
    """Whose rows a read may return: a tenant, and for a `user` only the sessions it owns."""

    tenant: str
    viewer: str | None = None


class CorruptEvent(ValueError):
    """A stored row that is not a valid event: the log was written by something else."""

    def __init__(self, seq: int, reason: str):
        super().__init__(f"event at seq {seq} is not a valid event: {reason}")
        self.seq = seq


@dataclass(frozen=True)
class EventQuery:
    """Events by position. With `before`, the `limit` events right before it (ascending)."""

    after: int | None = None
    before: int | None = None
    limit: int = 100
    types: tuple[str, ...] = ()


def event_from_row(row: asyncpg.Record) -> Event:
    data: dict[str, Any] = dict(row)
    data["event_id"] = str(data["event_id"])
    data["payload"] = json.loads(data["payload"])
    try:
        return parse_event(data)
    except ValidationError as err:
        raise CorruptEvent(data["seq"], str(err).splitlines()[0]) from err


class SessionStore:
    def __init__(self, pool: TenantPool):
        self._pool = pool

    async def ping(self) -> None:
        async with self._pool.system_transaction() as conn:
            await conn.fetchval("SELECT 1")

    async def api_key(self, key_id: str) -> keys.StoredKey | None:
        async with self._pool.system_transaction() as conn:
            return await keys.lookup(conn, key_id)

    async def session(self, scope: Scope, session_id: str) -> asyncpg.Record | None:
        """The projection row, deleted or not; callers decide what a deleted one means."""
        async with self._pool.transaction(*scope) as conn:
            return await conn.fetchrow(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = $1", session_id)

    async def sessions(self, scope: Scope, limit: int,
                       cursor: tuple[datetime, str] | None) -> list[asyncpg.Record]:
        """Live sessions, newest first; `cursor` is the (created_at, session_id) of the last seen."""
        where, args = "deleted_at IS NULL AND status <> 'deleted'", [limit]
        if cursor is not None:
            where += " AND (created_at, session_id) < ($2, $3)"
            args += list(cursor)
        async with self._pool.transaction(*scope) as conn:
            return await conn.fetch(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE {where} "
                "ORDER BY created_at DESC, session_id DESC LIMIT $1", *args)

    async def events(self, scope: Scope, session_id: str, query: EventQuery) -> list[Event]:
        sql, args = _events_sql(session_id, query)
        async with self._pool.transaction(*scope) as conn:
            rows = await conn.fetch(sql, *args)
        if query.before is not None:
            rows = list(reversed(rows))
        return [event_from_row(row) for row in rows]

    async def all_events(self, scope: Scope, session_id: str) -> AsyncIterator[Event]:
        """Every event in seq order, a page at a time."""
        after = 0
        while True:
            page = await self.events(scope, session_id, EventQuery(after=after, limit=PAGE))
            for event in page:
                yield event
            if len(page) < PAGE:
                return
            after = page[-1].seq

    async def outcome(self, tenant: str, session_id: str, command_id: str) -> Event | None:
        """The first event the command caused (a queued message causes a second one later)."""
        async with self._pool.transaction(tenant) as conn:
            row = await conn.fetchrow(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = $1 AND causation_id = $2 "
                "ORDER BY seq LIMIT 1", session_id, command_id)
        return event_from_row(row) if row is not None else None

    async def outcome_for_key(self, tenant: str, session_id: str, key_id: str) -> Event | None:
        """The first event caused by any command under an idempotency key id (idempotency.py)."""
        async with self._pool.transaction(tenant) as conn:
            row = await conn.fetchrow(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = $1 "
                "AND (causation_id = $2 OR starts_with(causation_id, $2 || '.')) ORDER BY seq LIMIT 1",
                session_id, key_id)
        return event_from_row(row) if row is not None else None

    async def last_seq(self, tenant: str, session_id: str) -> int:
        async with self._pool.transaction(tenant) as conn:
            return await conn.fetchval(
                "SELECT coalesce(max(seq), 0) FROM events WHERE session_id = $1", session_id)

    async def verify_session(self, scope: Scope, session_id: str, key: bytes | None,
                             anchored: list[Checkpoint]) -> verify.Report:
        """Recomputes the chain from the raw rows (wakeline.verify): rows, keys, checkpoints."""
        async with self._pool.transaction(*scope) as conn:
            return await verify.verify_session(conn, session_id, key=key, anchored=anchored)

    async def verify_tenant(self, tenant: str, key: bytes | None, anchored: list[Checkpoint]) -> verify.TenantReport:
        return await verify.verify_all(self._pool, tenant, key=key, anchored=anchored)


def _events_sql(session_id: str, query: EventQuery) -> tuple[str, list[Any]]:
    where, args = ["session_id = $1"], [session_id]
    for clause, value in (("seq > ${}", query.after), ("seq < ${}", query.before),
                          ("type = ANY(${}::text[])", list(query.types) or None)):
        if value is not None:
            args.append(value)
            where.append(clause.format(len(args)))
    order = "DESC" if query.before is not None else "ASC"
    args.append(query.limit)
    return (f"SELECT {EVENT_COLUMNS} FROM events WHERE {' AND '.join(where)} "
            f"ORDER BY seq {order} LIMIT ${len(args)}"), args

