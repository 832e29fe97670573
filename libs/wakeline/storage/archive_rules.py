"""What the archive accepts: redelivery, conflict, chain breaks, and the sessions rows it moves. Pure.

Every `EventStore.archive` applies these rules before it writes (`archive_writes.py` for
Postgres, `memory_store.py` for the in-memory twin), so both refuse the same batches.

A `(session_id, seq)` already stored with the same hash is a redelivery and a no-op. The
same key with a different hash means two histories claim one position in the log
(`ConflictingEvent`). A new event must also link to the archive: seq 1 to the genesis
hash, seq n to the stored (or same-batch) hash of seq n-1, and a fork's `forked` event
(at its parent's seq + 1) to the parent's archived hash at that seq; anything else is a
gap or an unrecorded branch (`BrokenChain`). Nothing may be stored on top of either: the archiver parks the
session from that event (`wakeline_archiver.archiver`), loudly, and keeps archiving every other one.

A month that retention dropped keeps its events only as event_keys tombstones: an old
event replayed into it is a redelivery like any other (same hash: a no-op; another hash:
a conflict), but a new one would resurrect the month (`RetainedOutEvent`), so it parks
its session too.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime

from wakeline.contract.events import GENESIS_HASH, Event, SessionForked
from wakeline.log.status import SessionRow, project

Key = tuple[str, int]
Month = tuple[int, int]  # (year, month) in UTC, as events is partitioned


class ConflictingEvent(RuntimeError):
    """An event whose `(session_id, seq)` is already archived with a different hash."""

    def __init__(self, session_id: str, seq: int, stored_hash: str, incoming_hash: str):
        super().__init__(
            f"conflicting event for session {session_id} seq {seq}: archived hash {stored_hash}, "
            f"incoming hash {incoming_hash}; refusing to archive a second history")
        self.session_id, self.seq = session_id, seq
        self.stored_hash, self.incoming_hash = stored_hash, incoming_hash


class BrokenChain(RuntimeError):
    """A new event whose `prev_hash` is not the archived hash of the seq before it."""

    def __init__(self, session_id: str, seq: int, previous_hash: str | None, prev_hash: str):
        found = (f"seq {seq - 1} is archived with hash {previous_hash}" if previous_hash
                 else f"seq {seq - 1} is not archived")
        super().__init__(f"event for session {session_id} seq {seq} does not continue the archive: its prev_hash "
                         f"is {prev_hash}, but {found}; refusing to archive a gap or a fork")
        self.session_id, self.seq, self.previous_hash, self.prev_hash = session_id, seq, previous_hash, prev_hash


class RetainedOutEvent(RuntimeError):
    """A new event in a month whose partition retention dropped."""

    def __init__(self, session_id: str, seq: int, ts: datetime):
        super().__init__(f"event for session {session_id} seq {seq} at {ts.isoformat()} is not archived, and its "
                         "month was dropped by retention; refusing to create the month again")
        self.session_id, self.seq, self.ts = session_id, seq, ts


def utc_month(ts: datetime) -> Month:
    utc = ts.astimezone(UTC) if ts.tzinfo else ts
    return utc.year, utc.month


def runs_to_look_up(events: Iterable[Event]) -> list[tuple[str, int, int]]:
    """What `select_new` needs from the archive, each event's own key and its predecessor's,
    as (session_id, first seq, last seq) runs: one per run of consecutive seqs (normally one
    per session), each starting at its first event's predecessor. Reading a run is one index
    range, where reading the keys one by one was a probe per event."""
    runs: list[tuple[str, int, int]] = []
    wanted = {(e.session_id, e.seq) for e in events}
    wanted |= {(e.payload.parent_session_id, e.payload.fork_seq) for e in events if isinstance(e, SessionForked)}
    for session_id, seq in sorted(wanted):
        if runs and runs[-1][0] == session_id and runs[-1][2] == seq - 1:
            runs[-1] = (session_id, runs[-1][1], seq)
        else:
            runs.append((session_id, max(seq - 1, 1), seq))
    return runs


def select_new(events: Iterable[Event], stored: Mapping[Key, str]) -> list[Event]:
    """The events not yet stored, in order; raises ConflictingEvent or BrokenChain.

    `events` are in (session_id, seq) order; `stored` maps the archived keys among
    `keys_to_look_up(events)` to their hashes.
    """
    seen: dict[Key, str] = dict(stored)
    fresh: list[Event] = []
    for event in events:
        key = (event.session_id, event.seq)
        known = seen.get(key)
        if known is not None:
            if known != event.hash:
                raise ConflictingEvent(event.session_id, event.seq, known, event.hash)
            continue
        previous = _predecessor_hash(event, seen)
        if previous != event.prev_hash:
            raise BrokenChain(event.session_id, event.seq, previous, event.prev_hash)
        seen[key] = event.hash
        fresh.append(event)
    return fresh


def _predecessor_hash(event: Event, seen: Mapping[Key, str]) -> str | None:
    if isinstance(event, SessionForked):
        if event.seq != event.payload.fork_seq + 1:
            return None
        return seen.get((event.payload.parent_session_id, event.payload.fork_seq))
    return GENESIS_HASH if event.seq == 1 else seen.get((event.session_id, event.seq - 1))


def check_skipped(skipped: Iterable[Event], stored: Mapping[Key, str]) -> None:
    """Events an insert skipped because a concurrent writer stored them first must match."""
    for event in skipped:
        known = stored.get((event.session_id, event.seq))
        if known != event.hash:
            raise ConflictingEvent(event.session_id, event.seq, str(known), event.hash)


def refuse_retained_out(fresh: Iterable[Event], dropped: Collection[Month]) -> None:
    """New events (from `select_new`) must not fall in a month retention dropped."""
    for event in fresh:
        if utc_month(event.ts) in dropped:
            raise RetainedOutEvent(event.session_id, event.seq, event.ts)


def project_sessions(current: Mapping[str, SessionRow], events: Iterable[Event]) -> list[SessionRow]:
    """The `sessions` rows `events` (in seq order per session) move forward, from the
    `current` rows by session id; sessions they leave as they were are not returned.
    Forward only: a redelivered or older event never regresses a row, and only a
    `session_created` (or `forked`) opens one (`status.project`)."""
    by_session: dict[str, list[Event]] = {}
    for event in events:
        by_session.setdefault(event.session_id, []).append(event)
    rows = []
    for session_id, its_events in by_session.items():
        before = current.get(session_id)
        row = project(before, its_events)
        if row is not None and row != before:
            rows.append(row)
    return rows
