"""The `EventStore` protocol: what code above the `events` table needs, and the values it speaks in.

`postgres_store.py` and `memory_store.py` implement it (tests/integration/
test_event_store_contract.py runs both); `sort_out` is the rule both apply to an append.
The table's shape is event_rows.py's, its statements event_statements.py's. The sessions
projection and the archiver's offsets are not here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from wakeline.contract.events import Event

Key = tuple[str, int]  # (session_id, seq): one position in one session's log


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
