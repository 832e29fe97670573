"""Pure translations of events into the rows the archiver writes; no I/O here.

`event_row` is one `events` row (with the derived audit columns `tool_name` and
`is_error`); `session_row` the `sessions` row a `session_created` event opens; and
`session_change` what any later event does to that row. The SQL lives in `store.py`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wakeline.events import Event


SESSION_COLUMNS = ("tenant", "session_id", "owner", "title", "model", "status", "last_seq",
                   "last_hash", "created_at", "updated_at", "parent_session_id", "fork_seq")


def session_row(event: Event) -> tuple[Any, ...]:
    """The `sessions` row a `session_created` event opens, in SESSION_COLUMNS order."""
    payload = event.payload
    return (event.tenant, event.session_id, payload.owner, payload.title, payload.config.model, "idle",
            event.seq, event.hash, event.ts, event.ts, payload.parent_session_id, payload.fork_seq)


@dataclass(frozen=True)
class SessionChange:
    """What one event does to its session's row, in the terms `wakeline.fold` uses.

    The row's status is then derived as fold derives it: deleted, else ended (an end
    reason is set), else running (in a turn), else idle. The row keeps no separate
    in-turn flag: it is read back as `status = 'running'`.
    """

    session_id: str
    seq: int
    hash: str
    ts: datetime
    in_turn: bool | None = None        # None: unchanged
    sets_ended_reason: bool = False    # True: ended_reason becomes `ended_reason` (None clears it)
    ended_reason: str | None = None
    title: str | None = None           # None: unchanged
    deleted_by: str | None = None      # None: unchanged


_IN_TURN = {"turn_started": True, "turn_ended": False, "session_ended": False, "deleted": False}


def session_change(event: Event) -> SessionChange:
    kind, payload = event.type, event.payload
    return SessionChange(
        session_id=event.session_id, seq=event.seq, hash=event.hash, ts=event.ts,
        in_turn=_IN_TURN.get(kind),
        # A message to a finished session continues it (fold clears the end reason too).
        sets_ended_reason=kind in ("session_ended", "user_message"),
        ended_reason=payload.reason if kind == "session_ended" else None,
        title=payload.title if kind == "title_generated" else None,
        deleted_by=payload.by if kind == "deleted" else None,
    )


def next_offsets(positions: Iterable[tuple[str, int, int]]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> one past the highest offset seen, from (topic, partition, offset)."""
    result: dict[tuple[str, int], int] = {}
    for topic, partition, offset in positions:
        result[topic, partition] = max(result.get((topic, partition), 0), offset + 1)
    return result
