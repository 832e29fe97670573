"""`PostgresEventStore`: the `EventStore` over the real `events` table.

Every statement runs in a `TenantPool.transaction(tenant[, viewer])`, so row-level
security decides what a caller sees and may write. The statements are in
`wakeline.storage.event_statements`; the archiver runs the same ones inside its batch transaction.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC

import asyncpg

from wakeline.storage.event_store import Appended, EventQuery, Key, Scope, sort_out
from wakeline.storage.event_rows import event_from_row
from wakeline.storage.event_statements import (
    SELECT_FIRST_CAUSED_BY, SELECT_FIRST_CAUSED_UNDER, SELECT_LAST_SEQ, insert_events, select_events, stored_hashes,
)
from wakeline.contract.events import Event
from wakeline.storage.pg import TenantPool
from wakeline.storage.retention_cuts import RETAINED_OUT_SQLSTATE


class PostgresEventStore:
    def __init__(self, pool: TenantPool):
        self._pool = pool

    async def append(self, events: Sequence[Event]) -> Appended:
        """Stores what is not stored yet; the same event again is `present`, another
        event at a stored (session_id, seq) a conflict (event_keys says which)."""
        await self._ensure_partitions(events)
        new: list[Key] = []
        present: list[Key] = []
        conflicts: list[Key] = []
        # One lock order for every writer, as the archiver keeps it.
        ordered = sorted(events, key=lambda e: (e.tenant, e.session_id, e.seq))
        for tenant, group in itertools.groupby(ordered, lambda e: e.tenant):
            batch = list(group)
            async with self._pool.transaction(tenant) as conn:
                fresh, known, refused = sort_out(batch, await stored_hashes(conn, _keys(batch)))
                inserted = await insert_events(conn, fresh)
                # Skipped by the insert: a concurrent writer stored them first.
                skipped = [e for e in fresh if (e.session_id, e.seq) not in inserted]
                hashes = await stored_hashes(conn, _keys(skipped)) if skipped else {}
            new += [key for key in _keys(fresh) if key in inserted]
            present += known
            conflicts += refused
            for event, key in zip(skipped, _keys(skipped)):
                (present if hashes.get(key) == event.hash else conflicts).append(key)
        return Appended(tuple(new), tuple(present), tuple(conflicts))

    async def read(self, scope: Scope, session_id: str, query: EventQuery) -> list[Event]:
        sql, args = select_events(session_id, query)
        async with self._pool.transaction(*scope) as conn:
            rows = await conn.fetch(sql, *args)
        if query.before is not None:
            rows = list(reversed(rows))
        return [event_from_row(row) for row in rows]

    async def first_caused_by(self, scope: Scope, session_id: str, causation_id: str) -> Event | None:
        return await self._first(scope, SELECT_FIRST_CAUSED_BY, session_id, causation_id)

    async def first_caused_under(self, scope: Scope, session_id: str, key_id: str) -> Event | None:
        return await self._first(scope, SELECT_FIRST_CAUSED_UNDER, session_id, key_id)

    async def last_seq(self, scope: Scope, session_id: str) -> int:
        async with self._pool.transaction(*scope) as conn:
            last: int = await conn.fetchval(SELECT_LAST_SEQ, session_id)
        return last

    async def _first(self, scope: Scope, sql: str, *args: str) -> Event | None:
        async with self._pool.transaction(*scope) as conn:
            row = await conn.fetchrow(sql, *args)
        return event_from_row(row) if row is not None else None

    async def _ensure_partitions(self, events: Sequence[Event]) -> None:
        # DDL in short transactions of its own, never inside the one that inserts. A month
        # retention dropped stays dropped: a new event there then fails to insert, loudly.
        for ts in {e.ts.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0) for e in events}:
            try:
                async with self._pool.system_transaction() as conn:
                    await conn.execute("SELECT ensure_events_partition($1)", ts)
            except asyncpg.PostgresError as exc:
                if exc.sqlstate != RETAINED_OUT_SQLSTATE:
                    raise


def _keys(events: Sequence[Event]) -> list[Key]:
    return [(e.session_id, e.seq) for e in events]
