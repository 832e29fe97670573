"""Builders of test data: who speaks, drafts, and drafts sealed into a chained session log.

Only construction lives here, and no I/O: what a log should fold to, store as or look like
on the wire is asserted in the tests; writing it to Kafka or Postgres is the harnesses'
job (`tests/integration/*_harness.py`). Unit tests seal at fixed times with ids derived
from the session id (`RECORDED`); tests against the real database seal as a running brain
would, now, with fresh UUIDs (`LIVE`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast
from uuid import uuid4

from wakeline.log.chain import Draft, seal
from wakeline.contract.events import (
    GENESIS_HASH, PAYLOAD_CLASSES, Event, FileReferencePayload, ForkedPayload, ModelTurnPayload, Payload,
    SessionCreatedPayload, ToolCallPayload, ToolResultPayload, Trust, UserMessagePayload,
)

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
TENANT = "tenant-a"


@dataclass(frozen=True)
class Speakers:
    """Who says what in a session: the user, the model (as the brain relays it), the runner's
    host, and the brain's own bookkeeping. A harness names its own cast where tests assert on it."""

    user: str = "user:alice"
    agent: str = "agent:scripted:default"
    runner: str = "runner:host-1"
    brain: str = "system:brain"

    def of(self, payload: Payload) -> tuple[str, Trust]:
        """The actor and trust a running system would give this payload."""
        match payload:
            case SessionCreatedPayload() | UserMessagePayload() | ForkedPayload():
                return self.user, "instruction"
            case ModelTurnPayload() | ToolCallPayload():
                return self.agent, "instruction"
            case ToolResultPayload() | FileReferencePayload():
                return self.runner, "data"  # what a tool saw is data, never an instruction
            case _:
                return self.brain, "instruction"

    def draft(self, what: Payload | str, causation_id: str | None = None, *, actor: str | None = None,
              trust: Trust | None = None, **fields: Any) -> Draft:
        """A draft of a payload, or of an event type named with its payload's fields:
        `draft("user_message", "cmd-1", text="hi")` or `draft(UserMessagePayload(text="hi"))`."""
        if isinstance(what, str):
            payload = cast(Payload, PAYLOAD_CLASSES[what](**fields))
        elif fields:
            raise TypeError(f"payload fields {sorted(fields)} given next to a built {type(what).__name__}")
        else:
            payload = what
        default_actor, default_trust = self.of(payload)
        return Draft(payload=payload, actor=actor or default_actor, trust=trust or default_trust,
                     causation_id=causation_id)


SPEAKERS = Speakers()
draft = SPEAKERS.draft


@dataclass(frozen=True)
class Stamps:
    """Where a sealed event's time and id come from, given its session id and seq."""

    ts: Callable[[int], datetime]
    event_id: Callable[[str, int], str]


def _fresh_event_id(session_id: str, seq: int) -> str:
    return str(uuid4())


# Reproducible: a second per seq from T0, ids readable in a failure message.
RECORDED = Stamps(ts=lambda seq: T0 + timedelta(seconds=seq), event_id=lambda session_id, seq: f"{session_id}-ev{seq}")
# As a running brain seals: the current time and a fresh UUID (the events table's event_id type).
LIVE = Stamps(ts=lambda seq: datetime.now(UTC), event_id=_fresh_event_id)


def at(times: Sequence[datetime], after: Event | None = None) -> Stamps:
    """`LIVE` ids at the given times, one per draft sealed after `after`."""
    first = after.seq + 1 if after else 1
    return Stamps(ts=lambda seq: times[seq - first], event_id=_fresh_event_id)


def new_session_id() -> str:
    return f"sess-{uuid4().hex[:12]}"


def sealed(drafts: Iterable[Draft], session_id: str | None = None, *, tenant: str = TENANT,
           after: Event | None = None, stamps: Stamps = RECORDED) -> list[Event]:
    """The drafts as one chain with dense seqs, from seq 1 or continuing `after`; a fresh
    session id unless one is given."""
    session_id = session_id or new_session_id()
    seq, prev_hash = (after.seq, after.hash) if after else (0, GENESIS_HASH)
    events = []
    for item in drafts:
        seq += 1
        event = seal(item, session_id=session_id, tenant=tenant, seq=seq, prev_hash=prev_hash,
                     ts=stamps.ts(seq), event_id=stamps.event_id(session_id, seq))
        events.append(event)
        prev_hash = event.hash
    return events


def redrafted(events: Iterable[Event]) -> list[Draft]:
    """The drafts the events were sealed from."""
    return [Draft(payload=e.payload, actor=e.actor, trust=e.trust, causation_id=e.causation_id) for e in events]


def reseal(events: Sequence[Event], session_id: str) -> list[Event]:
    """The same drafts sealed again with dense seqs, as the brain would have written them."""
    return sealed(redrafted(events), session_id)
