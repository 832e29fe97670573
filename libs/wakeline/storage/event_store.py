"""The `EventStore` protocol: what code above the `events` and `sessions` tables needs, and its values.

Three users, one interface: the gateway appends and reads by position; the brain's wake
reads a session's archived part and where its Kafka tail begins (`wake_read`, `prefix`);
the archiver stores batches with their offsets, moves the `sessions` rows forward, parks
sessions (`archive`, `park`, `parked`, `archived_offsets`). `postgres_store.py` and
`memory_store.py` implement it (tests/integration/test_event_store_contract.py runs both);
`sort_out` is the rule both apply to an append, `archive_rules` the rules of an archive
batch. The table's shape is event_rows.py's, its statements event_statements.py's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from wakeline.contract.events import Event
from wakeline.storage.archive_position import Parked

Key = tuple[str, int]  # (session_id, seq): one position in one session's log
Offsets = dict[tuple[str, int], int]  # (topic, partition) -> the next offset to archive


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


class ArchiveAt(NamedTuple):
    """Whose archive of which events partition a wake reads against."""

    group: str      # the archiver's consumer group (ARCHIVER_GROUP; tests run private ones)
    topic: str
    partition: int


class WakeRead(NamedTuple):
    """A session's archived part, read in one snapshot after the offset it is complete to."""

    owner: str | None      # the tenant the log says owns it; None: nothing of it archived
    events: list[Event]    # from its newest snapshot on (all of them for `whole`), in seq order
    next_offset: int       # the first offset of `at.partition` not archived yet (0: none)
    parked: Parked | None  # where the archiver parked it: its archive stops before from_seq


class ParkedSession(NamedTuple):
    """A session the archiver parked (`archiver_quarantine`), and the record it stopped at."""

    tenant: str
    session_id: str
    from_seq: int | None  # None: every event of the session is held
    reason: str
    topic: str
    partition: int
    offset: int


class EventStore(Protocol):
    async def append(self, events: Sequence[Event]) -> Appended: ...

    async def read(self, scope: Scope, session_id: str, query: EventQuery) -> list[Event]: ...

    async def first_caused_by(self, scope: Scope, session_id: str, causation_id: str) -> Event | None: ...

    async def first_caused_under(self, scope: Scope, session_id: str, key_id: str) -> Event | None: ...

    async def last_seq(self, scope: Scope, session_id: str) -> int: ...

    # The brain's wake.
    async def wake_read(self, session_id: str, tenant: str, at: ArchiveAt, whole: bool = False) -> WakeRead: ...

    async def prefix(self, tenant: str, parent_id: str, upto: int) -> list[Event]: ...

    # The archiver: raises `archive_rules`' refusals (and the database's) for a batch it cannot store.
    async def archive(self, group: str, events: Sequence[Event], offsets: Offsets) -> int: ...

    async def park(self, group: str, parked: Sequence[ParkedSession], offsets: Offsets) -> None: ...

    async def parked(self, sessions: Iterable[tuple[str, str]]) -> list[ParkedSession]: ...

    async def archived_offsets(self, group: str, topics: Iterable[str]) -> Offsets: ...


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
