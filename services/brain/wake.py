"""Loading a session the brain does not hold: the archive, then the un-archived tail.

The store (`EventStore.wake_read`) holds what the archiver has stored and says how far
into the session's events partition that is. The offset is read before the rows, so the
rows hold at least everything before it, and the Kafka tail read from that offset to the
partition's end (`tail_reads.TailReader`) covers the rest (overlapping, never leaving a
gap). Together they are every committed event of the session. The archive is read from
the session's newest `snapshot` event (`wakeline.log.snapshots`), so a wake reads and
folds what came after it, not the whole log, however long the session is.

A session id names one session across tenants: the owner comes from the log
(`session_tenant`, migration 0009, or the tail), never from the input that woke it.
Failures are sorted here: transient ones (`is_transient`) (a restarting database or broker, a tail that
did not reach the end in time) are retried by the caller; anything else is a fact
about the session's log and parks it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from wakeline.contract.events import Event, SessionForked, SnapshotTaken
from wakeline.contract.topics import ARCHIVER_GROUP, EVENTS, record_key
from wakeline.log.snapshots import current
from wakeline.runtime.weather import is_weather
from wakeline.storage.event_store import ArchiveAt, EventStore
from wakeline_brain.own_writes import OwnWrites
from wakeline_brain.tail_reads import WakeIncomplete


class SessionParked(RuntimeError):
    """The archiver parked the session (0010): its archive stops at a gap, so a fold of
    archive + tail would miss events and the brain would seal seqs that already exist."""


class Tails(Protocol):
    async def read(self, session_id: str, partition: int, start: int) -> list[Event]: ...


def is_transient(exc: BaseException) -> bool:
    """Weather (a database shutting down, a broker away) or a tail not read to its end yet."""
    return isinstance(exc, WakeIncomplete) or is_weather(exc)


class SessionLoader:
    """`store` holds the archive, `tails` reads what it does not hold yet (a `TailReader`);
    `archiver_group` names the archive to read, `topic` the events topic; `own` the writes of
    this brain's writer of a partition, if it has one (`own_writes.OwnWrites`): a tail it knows
    holds nothing of the session is not read."""

    def __init__(self, store: EventStore, tails: Tails, archiver_group: str = ARCHIVER_GROUP, topic: str = EVENTS,
                 own: Callable[[int], OwnWrites | None] = lambda partition: None):
        self._store = store
        self._tails = tails
        self._own = own
        self._archiver_group = archiver_group
        self._topic = topic

    async def load(self, session_id: str, tenant: str, partition: int, whole: bool = False) -> list[Event]:
        """Every committed event of the session from its newest archived snapshot on (from
        its first without one, or with `whole`), under the tenant that owns it (which may not
        be `tenant`, the claim of the input that woke it). `wakeline.log.snapshots.resume` folds them."""
        at = ArchiveAt(self._archiver_group, self._topic, partition)
        read = await self._store.wake_read(session_id, tenant, at, whole)
        if read.parked:
            raise SessionParked(f"the archiver parked it from seq {read.parked.from_seq}: {read.parked.reason}")
        if read.events and isinstance(read.events[0], SnapshotTaken) and not current(read.events[0]):
            read = await self._store.wake_read(session_id, tenant, at, whole=True)  # written by other code: all of it
        owner, archived = read.owner, read.events
        last = archived[-1].seq if archived else 0
        own = self._own(partition)
        if own is not None and own.untouched(record_key(session_id), read.next_offset):
            tail: list[Event] = []  # all of the partition from there is ours, and none of it this session's
        else:
            tail = [e for e in await self._tails.read(session_id, partition, read.next_offset) if e.seq > last]
        if owner is None and tail:
            owner = tail[0].tenant
        events = [e for e in archived + tail if e.tenant == (owner or tenant)]
        if events and isinstance(events[0], SessionForked):  # a fork folds from its parent's prefix
            forked = events[0].payload
            events = await self.prefix(forked.parent_session_id, owner or tenant, forked.fork_seq) + events
        return events

    async def prefix(self, parent_id: str, tenant: str, upto: int) -> list[Event]:
        """The parent's history 1..`upto` a fork inherits, from the archive (`wakeline.storage.lineage`);
        `PrefixUnavailable` when it is not all there, which parks the fork's wake."""
        return await self._store.prefix(tenant, parent_id, upto)
