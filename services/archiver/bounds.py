"""What a decoded event must satisfy before the archive tries to store it. Pure.

Anyone who can write to the topic (a bug, a foreign producer) can put anything in an
event, and some fields end up in btree indexes (`events_tenant_actor_ts`, the tool
index, `event_keys`), in RLS settings and in URLs: an actor of a few kilobytes cannot be
indexed, a NUL cannot be stored as text at all. Such an event fails here, at decode, with
a reason, instead of failing a database transaction. The charsets are `wakeline.contract.ids`'.
"""

from __future__ import annotations

import re

from wakeline.contract.codec import MalformedRecord
from wakeline.storage.event_rows import tool_name
from wakeline.contract.events import Event
from wakeline.contract.ids import ACTOR_PATTERN, CHAIN_HASH, SAFE_ID

_ACTOR = re.compile(ACTOR_PATTERN)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# A causation id is an input's id, sometimes with a prefix (`result:<tool_call_id>`).
MAX_CAUSATION = 256
MAX_TOOL_NAME = 200


def check_event(event: Event) -> None:
    """Raises MalformedRecord naming the first field out of bounds."""
    for field in ("session_id", "tenant"):
        if not SAFE_ID.fullmatch(getattr(event, field)):
            raise MalformedRecord(f"{field}: not a plain id (letters, digits, ._:@-, at most 200): "
                                  f"{_shown(getattr(event, field))}")
    if not _ACTOR.fullmatch(event.actor):
        raise MalformedRecord(f"actor: not <kind>:<name> of at most 210 printable characters: {_shown(event.actor)}")
    _check_text("causation_id", event.causation_id, MAX_CAUSATION)
    _check_text("payload.name", tool_name(event), MAX_TOOL_NAME)
    for field in ("hash", "prev_hash"):
        if not CHAIN_HASH.fullmatch(getattr(event, field)):
            raise MalformedRecord(f"{field}: not 64 lowercase hex digits: {_shown(getattr(event, field))}")


def _check_text(field: str, value: str | None, limit: int) -> None:
    if value is not None and (len(value) > limit or _CONTROL.search(value)):
        raise MalformedRecord(f"{field}: over {limit} characters or holds control characters: {_shown(value)}")


def _shown(value: str) -> str:
    """Enough of a bad value to recognise it in a log, never all of it."""
    return f"{value[:60]!r}{'...' if len(value) > 60 else ''} ({len(value)} characters)"
