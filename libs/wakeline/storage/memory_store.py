"""`MemoryEventStore`: the `EventStore` in a dict, for fast tests of the code above it.

It keeps rows, not events (`wakeline.storage.event_rows.event_row`), and reads them back through
`event_from_row`, so what it returns went through the same mapping as a Postgres row,
and a planted bad row (`plant`) fails the same way. The semantics are Postgres's plus
event_keys': one row per (session_id, seq), the same event again a no-op, another one a
conflict, reads scoped to a tenant (and a viewer to the sessions it owns); an archive batch
all or nothing, under `archive_rules`, with the sessions rows and offsets it moves. It covers
no Postgres behaviour (retention, row-level security, locks): tests/integration/
test_event_store_contract.py runs both.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from wakeline.contract.events import Event, SessionCreated, SessionForked
from wakeline.log.status import SessionRow
from wakeline.storage.archive_position import Parked
from wakeline.storage.archive_rules import project_sessions, select_new
from wakeline.storage.event_rows import EVENT_COLUMNS, READ_COLUMNS, event_from_row, event_row, hash_text
from wakeline.storage.event_store import (
    Appended, ArchiveAt, EventQuery, Key, Offsets, ParkedSession, Scope, WakeRead, sort_out,
)
from wakeline.storage.lineage import inherited


class SessionOfAnotherTenant(RuntimeError):
    """What Postgres refuses through `session_keys`: one session id under two tenants."""


class MemoryEventStore:
    def __init__(self) -> None:
        self._rows: dict[Key, dict[str, Any]] = {}
        self._owners: dict[str, str] = {}  # session_id -> owner, as the sessions projection has it
        self.sessions: dict[str, SessionRow] = {}  # the `sessions` rows archive batches moved
        self._offsets: dict[tuple[str, str, int], int] = {}  # (group, topic, partition) -> next offset
        self._parked: dict[tuple[str, str], tuple[str, ParkedSession]] = {}  # (tenant, session) -> (group, row)

    async def append(self, events: Sequence[Event]) -> Appended:
        ordered = sorted(events, key=lambda e: (e.tenant, e.session_id, e.seq))
        stored = {key: hash_text(row["hash"]) for key, row in self._rows.items()}  # as STORED_HASHES reads them
        fresh, present, conflicts = sort_out(ordered, stored)
        for event in fresh:
            self._rows[event.session_id, event.seq] = dict(zip(EVENT_COLUMNS, event_row(event)))
            match event:
                case SessionCreated(payload=p) | SessionForked(payload=p):
                    self._owners.setdefault(event.session_id, p.owner)
        return Appended(tuple((e.session_id, e.seq) for e in fresh), tuple(present), tuple(conflicts))

    async def read(self, scope: Scope, session_id: str, query: EventQuery) -> list[Event]:
        rows = [r for r in self._visible(scope, session_id)
                if (query.after is None or r["seq"] > query.after)
                and (query.before is None or r["seq"] < query.before)
                and (not query.types or r["type"] in query.types)]
        page = rows[-query.limit:] if query.before is not None else rows[:query.limit]
        return [_event(r) for r in page]

    async def first_caused_by(self, scope: Scope, session_id: str, causation_id: str) -> Event | None:
        return self._first(scope, session_id, lambda c: c == causation_id)

    async def first_caused_under(self, scope: Scope, session_id: str, key_id: str) -> Event | None:
        return self._first(scope, session_id, lambda c: c == key_id or c.startswith(key_id + "."))

    async def last_seq(self, scope: Scope, session_id: str) -> int:
        return max((r["seq"] for r in self._visible(scope, session_id)), default=0)

    async def wake_read(self, session_id: str, tenant: str, at: ArchiveAt, whole: bool = False) -> WakeRead:
        tenants = {r["tenant"] for (sid, _), r in self._rows.items() if sid == session_id}
        owner = min(tenants) if tenants else None
        offset = self._offsets.get((at.group, at.topic, at.partition), 0)
        group, row = self._parked.get((owner or tenant, session_id), (None, None))
        if row is not None and group == at.group:
            return WakeRead(owner, [], offset, Parked(row.from_seq, row.reason))  # type: ignore[arg-type]
        if owner is None:
            return WakeRead(None, [], offset, None)
        rows = self._visible(Scope(owner), session_id)
        start = 1 if whole else max((r["seq"] for r in rows if r["type"] == "snapshot"), default=1)
        return WakeRead(owner, [_event(r) for r in rows if r["seq"] >= start], offset, None)

    async def prefix(self, tenant: str, parent_id: str, upto: int) -> list[Event]:
        async def own_upto(session_id: str, limit: int) -> list[Event]:
            return [_event(r) for r in self._visible(Scope(tenant), session_id) if r["seq"] <= limit]
        return await inherited(own_upto, parent_id, upto)

    async def archive(self, group: str, events: Sequence[Event], offsets: Offsets) -> int:
        """All or nothing, as one transaction: every tenant's share is checked before any is stored."""
        ordered = sorted(events, key=lambda e: (e.tenant, e.session_id, e.seq))
        stored = {key: hash_text(row["hash"]) for key, row in self._rows.items()}
        fresh: list[Event] = []
        for _, share in itertools.groupby(ordered, lambda e: e.tenant):
            fresh += select_new(list(share), stored)
        holders = {sid: row["tenant"] for (sid, _), row in self._rows.items()}
        for event in fresh:
            if holders.setdefault(event.session_id, event.tenant) != event.tenant:
                raise SessionOfAnotherTenant(f"session id {event.session_id} is held by another tenant")
        await self.append(fresh)
        for row in project_sessions(self.sessions, fresh):
            self.sessions[row.session_id] = row
        self._save_offsets(group, offsets)
        return len(fresh)

    async def park(self, group: str, parked: Sequence[ParkedSession], offsets: Offsets) -> None:
        for row in parked:
            self._parked.setdefault((row.tenant, row.session_id), (group, row))
        self._save_offsets(group, offsets)

    async def parked(self, sessions: Iterable[tuple[str, str]]) -> list[ParkedSession]:
        return [self._parked[key][1] for key in sorted(set(sessions)) if key in self._parked]

    async def archived_offsets(self, group: str, topics: Iterable[str]) -> Offsets:
        wanted = set(topics)
        return {(t, p): at for (g, t, p), at in self._offsets.items() if g == group and t in wanted}

    def _save_offsets(self, group: str, offsets: Offsets) -> None:
        for (topic, partition), at in offsets.items():
            key = (group, topic, partition)
            self._offsets[key] = max(self._offsets.get(key, 0), at)

    def plant(self, **row: Any) -> None:
        """Stores a row as is, unchecked: what something other than a writer left in the table.
        Unnamed columns come from the stored row at the same (session_id, seq), if any."""
        key = (row["session_id"], row["seq"])
        merged = {**self._rows.get(key, {}), **row}
        if not isinstance(merged.get("payload"), (str, type(None))):
            merged["payload"] = json.dumps(merged["payload"])
        self._rows[key] = merged

    def _visible(self, scope: Scope, session_id: str) -> list[dict[str, Any]]:
        if scope.viewer and self._owners.get(session_id) != scope.viewer:
            return []
        rows = [r for (sid, _), r in self._rows.items() if sid == session_id and r["tenant"] == scope.tenant]
        return sorted(rows, key=lambda r: r["seq"])

    def _first(self, scope: Scope, session_id: str, caused: Callable[[str], bool]) -> Event | None:
        for row in self._visible(scope, session_id):
            if row["causation_id"] is not None and caused(row["causation_id"]):
                return _event(row)
        return None


def _event(row: dict[str, Any]) -> Event:
    """What a reader selects of the row (READ_COLUMNS), as an event."""
    return event_from_row({c: row.get(c) for c in READ_COLUMNS})
