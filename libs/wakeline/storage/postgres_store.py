"""`PostgresEventStore`: the `EventStore` over the real `events` table.

Every statement runs in a `TenantPool.transaction(tenant[, viewer])`, so row-level
security decides what a caller sees and may write. The statements are in
`wakeline.storage.event_statements`, the archiver's batch `archive_writes`, the wake's first
question `archive_position`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import asyncpg

from wakeline.contract.events import Event
from wakeline.storage import archive_writes
from wakeline.storage.archive_position import wake_start
from wakeline.storage.archive_rules import Month, utc_month
from wakeline.storage.event_rows import event_from_row
from wakeline.storage.event_statements import (
    SELECT_FIRST_CAUSED_BY, SELECT_FIRST_CAUSED_UNDER, SELECT_LAST_SEQ, events_from_snapshot, insert_events,
    select_events, session_events, stored_hashes,
)
from wakeline.storage.event_store import (
    Appended, ArchiveAt, EventQuery, Key, Offsets, ParkedSession, Scope, WakeRead, sort_out,
)
from wakeline.storage.lineage import prefix_events
from wakeline.storage.pg import TenantPool
from wakeline.storage.retention_cuts import RETAINED_OUT_SQLSTATE


class PostgresEventStore:
    def __init__(self, pool: TenantPool):
        self._pool = pool
        self._months: set[Month] = set()   # partitions of `events` known to exist
        self._dropped: set[Month] = set()  # by retention: never created again

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

    async def wake_read(self, session_id: str, tenant: str, at: ArchiveAt, whole: bool = False) -> WakeRead:
        # Offset first, rows second, in one transaction: the rows then hold at least
        # everything before the offset, and a tail read from it overlaps rather than leaves a gap.
        async with self._pool.system_transaction() as conn:
            start = await wake_start(conn, session_id, tenant, at.topic, at.partition, at.group)
            if start.owner is None or start.parked:
                # No key in event_keys under any tenant, so no row in events either (each row's
                # key is inserted by the same statement, and keys outlive retention): a new
                # session's wake skips the two reads, 3 round trips instead of 5.
                return WakeRead(start.owner, [], start.next_offset, start.parked)
            events = await (session_events if whole else events_from_snapshot)(conn, session_id)
        return WakeRead(start.owner, events, start.next_offset, None)

    async def prefix(self, tenant: str, parent_id: str, upto: int) -> list[Event]:
        async with self._pool.transaction(tenant) as conn:
            return await prefix_events(conn, parent_id, upto)

    async def archive(self, group: str, events: Sequence[Event], offsets: Offsets) -> int:
        """The batch and its offsets in one transaction; how many events were new."""
        await self._ensure_partitions(events)
        async with self._pool.system_transaction() as conn:
            return await archive_writes.store_batch(conn, group, events, offsets, self._dropped)

    async def park(self, group: str, parked: Sequence[ParkedSession], offsets: Offsets) -> None:
        async with self._pool.system_transaction() as conn:
            await archive_writes.park(conn, group, parked, offsets)

    async def parked(self, sessions: Iterable[tuple[str, str]]) -> list[ParkedSession]:
        keys = sorted(set(sessions))
        if not keys:
            return []
        async with self._pool.system_transaction() as conn:
            return await archive_writes.find_parked(conn, keys)

    async def archived_offsets(self, group: str, topics: Iterable[str]) -> Offsets:
        async with self._pool.system_transaction() as conn:
            return await archive_writes.stored_positions(conn, group, topics)

    async def _first(self, scope: Scope, sql: str, *args: str) -> Event | None:
        async with self._pool.transaction(*scope) as conn:
            row = await conn.fetchrow(sql, *args)
        return event_from_row(row) if row is not None else None

    async def _ensure_partitions(self, events: Iterable[Event]) -> None:
        # DDL in short transactions of its own, never inside the one that inserts or holding
        # locks for a batch's length. A month retention dropped stays dropped: `append` then
        # fails to insert there, loudly; `archive` refuses its new events (`refuse_retained_out`).
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


def _keys(events: Sequence[Event]) -> list[Key]:
    return [(e.session_id, e.seq) for e in events]
