"""The `events` table's shape: its columns, and an event as a row and back.

The one place that knows the columns. Writers derive the audit columns `tool_name` and
`is_error` from the payload (`event_row`); readers rebuild the canonical event from the
other columns (`event_from_row`), and a row that does not rebuild is a `CorruptEvent`
naming its seq. A chain hash is stored as its 32 bytes and read back as hex. The
statements on the table are event_statements.py's.
"""

from __future__ import annotations

import json
from typing import Any

from wakeline.contract.events import CorruptEvent, Event, ToolCallRequested, ToolResultReceived, parse_event
from wakeline.contract.ids import CHAIN_HASH

COLUMNS: tuple[tuple[str, str], ...] = (
    ("tenant", "text"), ("session_id", "text"), ("seq", "bigint"), ("event_id", "uuid"),
    ("causation_id", "text"), ("type", "text"), ("actor", "text"), ("trust", "text"),
    ("ts", "timestamptz"), ("prev_hash", "bytea"), ("hash", "bytea"), ("payload", "jsonb"),
    ("tool_name", "text"), ("is_error", "boolean"))
EVENT_COLUMNS = tuple(name for name, _ in COLUMNS)  # `event_row`'s order
DERIVED_COLUMNS = ("tool_name", "is_error")
# What a reader selects to rebuild (and re-hash) the event.
READ_COLUMNS = tuple(name for name in EVENT_COLUMNS if name not in DERIVED_COLUMNS)
# A chain hash is stored as its 32 bytes (0022) and leaves the database as the event
# carries it, 64 lowercase hex digits: every statement that reads one selects `hex_of(column)`.
HASH_COLUMNS = ("prev_hash", "hash")


def hex_of(column: str) -> str:
    """A stored hash column as the event's hex text, under the column's own name."""
    return f"encode({column}, 'hex') AS {column.rsplit('.', 1)[-1]}"


SELECT_LIST = ", ".join(hex_of(name) if name in HASH_COLUMNS else name for name in READ_COLUMNS)


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


def hash_bytes(value: str) -> bytes:
    """The stored form of a chain hash. Only the form `chain.seal` makes is accepted: hex
    that is upper case or spaced would come back as other text than the event hashed."""
    if not CHAIN_HASH.fullmatch(value):
        raise ValueError(f"not a chain hash (64 lowercase hex digits): {value[:70]!r}")
    return bytes.fromhex(value)


def hash_text(value: bytes | str) -> str:
    """A hash as an event carries it, from what a row holds: the bytes `event_row` made (the
    memory store keeps those), or text already (a statement's `hex_of`, a planted value)."""
    return value.hex() if isinstance(value, bytes) else value


def event_row(event: Event) -> tuple[Any, ...]:
    """The `events` row in EVENT_COLUMNS order; the payload as JSON text for jsonb, the
    hashes as bytes for bytea."""
    return (event.tenant, event.session_id, event.seq, event.event_id, event.causation_id,
            event.type, event.actor, event.trust, event.ts, hash_bytes(event.prev_hash), hash_bytes(event.hash),
            event.payload.model_dump_json(), tool_name(event), is_error(event))


def event_from_row(row: Any) -> Event:
    """The event a row (READ_COLUMNS at least) holds; `CorruptEvent` if it holds none."""
    data: dict[str, Any] = dict(row)
    try:
        data["event_id"] = str(data["event_id"])
        for column in HASH_COLUMNS:
            if column in data:
                data[column] = hash_text(data[column])
        if isinstance(data["payload"], str):
            data["payload"] = json.loads(data["payload"])
        return parse_event(data)
    except (ValueError, KeyError) as err:  # pydantic's ValidationError is a ValueError
        raise CorruptEvent(str(err).splitlines()[0], data.get("seq")) from err
