"""An event as a row of the `events` table and back: the one place that knows the mapping.

The writer (archiver) derives `tool_name` and `is_error` from the payload for audit
queries; readers (wake, verify, the gateway) rebuild the canonical event from the columns.
"""

from __future__ import annotations

import json
from typing import Any

from wakeline.events import Event, ToolCallRequested, ToolResultReceived, parse_event

EVENT_COLUMNS = ("tenant", "session_id", "seq", "event_id", "causation_id", "type", "actor", "trust",
                 "ts", "prev_hash", "hash", "payload", "tool_name", "is_error")
# What a reader selects to rebuild the event (the derived columns are not part of it).
READ_COLUMNS = ("session_id, seq, event_id, causation_id, tenant, actor, trust, ts, prev_hash, hash, "
                "type, payload")


def tool_name(event: Event) -> str | None:
    match event:
        case ToolCallRequested(payload=p) | ToolResultReceived(payload=p):
            return p.name
    return None


def is_error(event: Event) -> bool | None:
    match event:
        case ToolResultReceived(payload=p):
            return p.is_error
    return None


def event_row(event: Event) -> tuple[Any, ...]:
    """The `events` row in EVENT_COLUMNS order; the payload as JSON text for jsonb."""
    return (event.tenant, event.session_id, event.seq, event.event_id, event.causation_id,
            event.type, event.actor, event.trust, event.ts, event.prev_hash, event.hash,
            event.payload.model_dump_json(), tool_name(event), is_error(event))


def event_from_row(row: Any) -> Event:
    data = dict(row)
    data["event_id"] = str(data["event_id"])
    data["payload"] = json.loads(data["payload"]) if isinstance(data["payload"], str) else data["payload"]
    return parse_event(data)
