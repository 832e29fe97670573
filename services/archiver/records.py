"""What the archiver needs of a consumed Kafka record, and how an event is decoded from one.

faust's `ConsumerMessage` and aiokafka's `ConsumerRecord` both fit `RawRecord`, so the
batch handlers do not depend on the consumer library.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from wakeline.codec import MalformedRecord, decode
from wakeline.events import EventBase, parse_event


class RawRecord(Protocol):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def decode_event(value: bytes | None) -> EventBase:
    """One event from a record value; MalformedRecord if it is not one the archive can hold."""
    event = decode(value, parse_event)
    try:
        uuid.UUID(event.event_id)
    except ValueError:
        raise MalformedRecord(f"event_id: not a UUID: {event.event_id[:80]!r}") from None
    return event


def without_nul(value: str | None) -> str | None:
    """Postgres text cannot hold NUL; letters keep everything else as it came."""
    return value.replace("\x00", "\\x00") if value is not None else None
