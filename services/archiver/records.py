"""What the archiver needs of a consumed Kafka record, and how an event is decoded from one.

faust's `ConsumerMessage` and aiokafka's `ConsumerRecord` both fit `RawRecord`, so the
batch handlers do not depend on the consumer library. An event is decoded, then
checked against `bounds`; a record that fails either is not an event the archive can
hold, but `claimed_session` may still say which session it claims to belong to.
"""

from __future__ import annotations

import json
import uuid
from typing import NamedTuple, Protocol

from wakeline.contract.codec import MalformedRecord, decode
from wakeline.contract.events import Event, parse_event
from wakeline.contract.ids import SAFE_ID
from wakeline_archiver.bounds import check_event


class RawRecord(Protocol):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def decode_event(value: bytes | None) -> Event:
    """One event from a record value; MalformedRecord if it is not one the archive can hold."""
    event = decode(value, parse_event)
    try:
        uuid.UUID(event.event_id)
    except ValueError:
        raise MalformedRecord(f"event_id: not a UUID: {event.event_id[:80]!r}") from None
    check_event(event)
    return event


class SessionKey(NamedTuple):
    tenant: str
    session_id: str


class Claim(NamedTuple):
    session: SessionKey
    seq: int | None


def claimed_session(value: bytes | None) -> Claim | None:
    """The (tenant, session_id) and seq an undecodable record names, if both ids are plain.

    Lets the archiver park that session (its later events would sit above a gap) with
    the real reason, rather than waiting for the next event to break the chain.
    """
    try:
        data = json.loads(value or b"")
    except (ValueError, RecursionError):  # deep nesting overflows the stdlib parser
        return None
    if not isinstance(data, dict):
        return None
    tenant, session_id, seq = data.get("tenant"), data.get("session_id"), data.get("seq")
    if not all(isinstance(v, str) and SAFE_ID.fullmatch(v) for v in (tenant, session_id)):
        return None
    return Claim(SessionKey(tenant, session_id), seq if type(seq) is int and seq >= 1 else None)


def without_nul(value: str | None) -> str | None:
    """Postgres text cannot hold NUL; letters keep everything else as it came."""
    return value.replace("\x00", "\\x00") if value is not None else None
