"""An event from a dict or JSON: `parse_event`, and `CorruptEvent` for what is not one."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from wakeline.contract.events.event_types import Event

_EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


class CorruptEvent(ValueError):
    """Bytes or a row that are not a valid event: the log holds something no brain sealed."""

    def __init__(self, reason: str, seq: int | None = None):
        where = f"event at seq {seq}" if seq is not None else "event"
        super().__init__(f"{where} is not a valid event: {reason}")
        self.seq = seq
        self.reason = reason


def parse_event(data: dict[str, Any] | str | bytes) -> Event:
    """Decodes one event from a dict or JSON; raises `pydantic.ValidationError` if malformed."""
    if isinstance(data, (str, bytes)):
        return _EVENT_ADAPTER.validate_json(data)
    return _EVENT_ADAPTER.validate_python(data)

