"""Builders of sealed session logs for unit tests: fixed times, ids derived from the session id.

Only construction lives here; what a log should fold to is asserted in the tests.
`Record` stands for a consumed Kafka record of such a log, as the archiver receives it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Iterable, Sequence
from uuid import uuid4

from wakeline.chain import Draft, seal
from wakeline.events import GENESIS_HASH, PAYLOAD_CLASSES, Event

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
TENANT = "tenant-a"
USER = "user:alice"
AGENT = "agent:scripted:default"
_SPEAKERS = {
    "session_created": (USER, "instruction"),
    "user_message": (USER, "instruction"),
    "model_turn": (AGENT, "instruction"),
    "tool_call": (AGENT, "instruction"),
    "tool_result": ("runner:host-1", "data"),
    "file_reference": ("runner:host-1", "data"),
}


def new_session_id() -> str:
    return f"sess-{uuid4().hex[:12]}"


def draft(type_: str, causation_id: str | None = None, **payload: Any) -> Draft:
    actor, trust = _SPEAKERS.get(type_, ("system:brain", "instruction"))
    return Draft(payload=PAYLOAD_CLASSES[type_](**payload), actor=actor, trust=trust,
                 causation_id=causation_id)


def seal_all(drafts: Iterable[Draft], session_id: str, first_seq: int = 1,
             prev_hash: str = GENESIS_HASH) -> list[Event]:
    events = []
    for seq, item in enumerate(drafts, start=first_seq):
        event = seal(item, session_id=session_id, tenant=TENANT, seq=seq, prev_hash=prev_hash,
                     ts=T0 + timedelta(seconds=seq), event_id=f"{session_id}-ev{seq}")
        events.append(event)
        prev_hash = event.hash
    return events


def reseal(events: Sequence[Event], session_id: str) -> list[Event]:
    """The same drafts sealed again with dense seqs, as the brain would have written them."""
    return seal_all([Draft(payload=e.payload, actor=e.actor, trust=e.trust,
                           causation_id=e.causation_id) for e in events], session_id)


def created() -> Draft:
    return draft("session_created", "cmd-create", config={"require_approval": ["bash"]}, owner=USER)


def exchange(turn: int) -> list[Draft]:
    """One turn: the user asks, the model calls a tool, reads its result and answers."""
    call_id = f"tc-{turn}"
    return [
        draft("user_message", f"cmd-{turn}", text=f"question {turn}"),
        draft("turn_started", turn=turn),
        draft("model_turn", text="Let me look.", usage={"input_tokens": 100, "output_tokens": 10},
              stop_reason="tool_use", tool_call_ids=[call_id]),
        draft("tool_call", name="bash", tool_call_id=call_id, input={"cmd": "ls"}),
        draft("tool_result", f"tr-{turn}", tool_call_id=call_id, name="bash", output="a.txt\n"),
        draft("model_turn", text=f"answer {turn}", usage={"input_tokens": 150, "output_tokens": 5}),
        draft("turn_ended", turn=turn),
    ]


def conversation(n: int, session_id: str) -> list[Event]:
    """A valid chain of `n` events: `session_created`, then whole turns, cut at `n`."""
    drafts = [created()]
    turn = 0
    while len(drafts) < n:
        turn += 1
        drafts += exchange(turn)
    return seal_all(drafts[:n], session_id)


@dataclass
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
