"""A session's replay: the state `wakeline.fold` derives after each event. Pure.

States are rendered as JSON through pydantic (the state is a dataclass holding pydantic
parts); sets become sorted lists so the same log always renders the same bytes.
"""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import TypeAdapter

from wakeline.events import Event
from wakeline.fold import apply
from wakeline.state import SessionState

_STATE = TypeAdapter(SessionState)
_SETS = ("awaiting_approval", "seen_inputs")


def state_json(state: SessionState) -> dict[str, Any]:
    data = _STATE.dump_python(state, mode="json")
    for name in _SETS:
        data[name] = sorted(data[name])
    return data


def replay_steps(events: Iterable[Event]) -> list[dict[str, Any]]:
    """One `{seq, type, state}` per event; raises `wakeline.fold.FoldError` on a broken log."""
    state, steps = SessionState(), []
    for event in events:
        state = apply(state, event)
        steps.append({"seq": event.seq, "type": event.type, "state": state_json(state)})
    return steps
