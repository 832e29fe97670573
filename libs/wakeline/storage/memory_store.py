"""`MemoryEventStore`: the `EventStore` in a dict, for fast tests of the code above it.

It keeps rows, not events (`wakeline.storage.event_rows.event_row`), and reads them back through
`event_from_row`, so what it returns went through the same mapping as a Postgres row,
and a planted bad row (`plant`) fails the same way. The semantics are Postgres's plus
event_keys': one row per (session_id, seq), the same event again a no-op, another one a
conflict, reads scoped to a tenant (and a viewer to the sessions it owns). It covers no
Postgres behaviour: tests/integration/test_event_store_contract.py runs both.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from wakeline.storage.event_store import Appended, EventQuery, Key, Scope, sort_out
from wakeline.storage.event_rows import EVENT_COLUMNS, READ_COLUMNS, event_from_row, event_row, hash_text
from wakeline.contract.events import Event, SessionCreated, SessionForked


class MemoryEventStore:
    def __init__(self) -> None:
        self._rows: dict[Key, dict[str, Any]] = {}
        self._owners: dict[str, str] = {}  # session_id -> owner, as the sessions projection has it

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
