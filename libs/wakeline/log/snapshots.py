"""Snapshot events: a session's folded state written into its own log.

A `snapshot` event holds the fold of every event before it (`state_json`), hashed and
chained like any event, so a wake reads the newest snapshot and the events after it
instead of the whole log (`resume`). It is a marker: a fold from the first event passes
over it unchanged. Nothing trusts a snapshot blindly twice: verify and the replay fold
from the first event and check each snapshot against the fold of its prefix
(`checked_fold`). When the brain takes one is the brain's business, not this module's.
"""

from __future__ import annotations

from collections.abc import Sequence

from wakeline.contract.events import Event, SnapshotPayload, SnapshotTaken
from wakeline.log.fold import FoldError, fold
from wakeline.log.state import SessionState
from wakeline.log.state_json import STATE_FORMAT, state_from_json, state_hash, state_to_json


class SnapshotMismatch(FoldError):
    """A snapshot that does not hold the fold of its prefix: sealed correctly, lying inside."""

    def __init__(self, seq: int, reason: str):
        super().__init__(f"snapshot at seq {seq}: {reason}")
        self.seq, self.reason = seq, reason


def snapshot_payload(state: SessionState) -> SnapshotPayload:
    data = state_to_json(state)
    return SnapshotPayload(state=data, state_hash=state_hash(data), format=STATE_FORMAT)


def current(snapshot: SnapshotTaken) -> bool:
    """Written in the format this code folds to. One of another (older code, a changed
    fold) is neither resumed from nor held against the fold: a wake reads the whole log."""
    return snapshot.payload.format == STATE_FORMAT


def resume(events: Sequence[Event]) -> SessionState:
    """The fold of a log read from its newest snapshot (or from its first event): what a
    wake continues from. The snapshot is taken at its word; verify is what checks it."""
    if events and isinstance(events[0], SnapshotTaken):
        if not current(events[0]):
            raise FoldError(f"snapshot at seq {events[0].seq} is in format {events[0].payload.format}, "
                            f"not {STATE_FORMAT}: read the log from its first event")
        start = state_from_json(events[0].payload.state)
        if start.last_seq != events[0].seq - 1:
            raise FoldError(f"snapshot at seq {events[0].seq} holds the state at seq {start.last_seq}")
        return fold(events, start)
    return fold(events)


def mismatch(before: SessionState, snapshot: SnapshotTaken) -> str | None:
    """Why `snapshot` does not hold `before` (the fold of its prefix), or None if it does
    (or cannot be compared: another format's, which no wake resumes from)."""
    if not current(snapshot):
        return None
    data = state_to_json(before)
    if snapshot.payload.state != data:
        differ = sorted(k for k in data.keys() | snapshot.payload.state.keys()
                        if data.get(k) != snapshot.payload.state.get(k))
        return f"its state differs from the fold of seq 1..{before.last_seq} in {', '.join(differ)}"
    if snapshot.payload.state_hash != state_hash(data):
        return "its state_hash is not the hash of its state"
    return None


def checked_fold(events: Sequence[Event], state: SessionState | None = None) -> SessionState:
    """`fold` from the first event that checks each snapshot on the way; raises
    `SnapshotMismatch` at the first that lies. Linear: the state is frozen only at snapshots."""
    state, start = state or SessionState(), 0
    for at, event in enumerate(events):
        if isinstance(event, SnapshotTaken):
            state, start = fold(events[start:at], state), at
            reason = mismatch(state, event)
            if reason is not None:
                raise SnapshotMismatch(event.seq, reason)
    return fold(events[start:], state)
