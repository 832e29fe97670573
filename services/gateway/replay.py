"""A session's replay: the state `wakeline.log.fold` derives after each event. Pure.

States are rendered by `wakeline.log.state_json` (sets as sorted lists, so the same log always
renders the same bytes). The replay folds from the first event, so each `snapshot` event
on the way is checked against the state before it: one that lies stops the replay as a
broken log does (`SnapshotMismatch`, a `FoldError`).
"""

from __future__ import annotations

from typing import Any, Iterable

from wakeline.contract.events import Event, SnapshotTaken
from wakeline.log.fold import apply
from wakeline.log.snapshots import SnapshotMismatch, mismatch
from wakeline.log.state import SessionState
from wakeline.log.state_json import state_to_json

state_json = state_to_json  # the replay's rendering is the snapshot's: one definition


def replay_steps(events: Iterable[Event]) -> list[dict[str, Any]]:
    """One `{seq, type, state}` per event; raises `wakeline.log.fold.FoldError` on a broken log."""
    state, steps = SessionState(), []
    for event in events:
        if isinstance(event, SnapshotTaken) and (reason := mismatch(state, event)) is not None:
            raise SnapshotMismatch(event.seq, reason)
        state = apply(state, event)
        steps.append({"seq": event.seq, "type": event.type, "state": state_json(state)})
    return steps
