"""Which declared tools' calls a session's harness has yet to answer, from its events. Pure.

The log decides what is pending: a call `answered_by` client is pending from its
`tool_call` until its `tool_result` (whoever recorded it: the harness, a denial, the
brain's timeout), and none is once the session ends, is deleted, or a fork starts over
(as `wakeline.log.fold` has it). A call that awaits approval is pending but not yet offered:
the harness gets it once it is granted; a call to a tool the config makes ask for approval
is held from its `tool_call` on, since its `approval_requested` comes right after it. The
gateway's harness streams and the session's `pending_client_calls` read this, folding
only the event types that move it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wakeline.contract.events import (
    ApprovalDenied, ApprovalGranted, ApprovalRequested, Event, SessionCreated, SessionDeleted, SessionEnded,
    SessionForked, ToolCallRequested, ToolResultReceived, UserMessageReceived,
)

# The event types `ClientCalls.apply` acts on: a reader may fetch only these.
MOVING_TYPES = ("session_created", "tool_call", "tool_result", "approval_requested", "approval_granted",
                "approval_denied", "session_ended", "deleted", "forked", "user_message")


@dataclass(frozen=True)
class OfferedCall:
    """A call as the harness receives it (SSE `tool_call`)."""

    session_id: str
    tool_call_id: str
    name: str
    input: dict[str, Any]
    seq: int

    def wire(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "tool_call_id": self.tool_call_id, "name": self.name,
                "input": self.input, "seq": self.seq}


@dataclass
class ClientCalls:
    pending: dict[str, OfferedCall] = field(default_factory=dict)  # in the order called
    held: set[str] = field(default_factory=set)  # awaiting approval
    ended: Event | None = None  # the session_ended or deleted event the session stands at, if any
    needs_approval: frozenset[str] = frozenset()  # the config's require_approval

    def apply(self, event: Event) -> list[OfferedCall]:
        """Moves over one event; returns the calls it makes offerable (new, or just approved)."""
        match event:
            case SessionCreated(payload=p):
                self.needs_approval = frozenset(p.config.require_approval)
            case ToolCallRequested(payload=p) if p.answered_by == "client":
                call = OfferedCall(event.session_id, p.tool_call_id, p.name, p.input, event.seq)
                self.pending[p.tool_call_id] = call
                if p.name in self.needs_approval:
                    self.held.add(p.tool_call_id)
                return [call] if p.tool_call_id not in self.held else []
            case ToolResultReceived(payload=p):
                self.pending.pop(p.tool_call_id, None)
                self.held.discard(p.tool_call_id)
            case ApprovalRequested(payload=p):
                self.held.add(p.tool_call_id)
            case ApprovalGranted(payload=p):
                self.held.discard(p.tool_call_id)
                return [self.pending[p.tool_call_id]] if p.tool_call_id in self.pending else []
            case ApprovalDenied(payload=p):
                self.held.discard(p.tool_call_id)
            case SessionEnded() | SessionDeleted():
                self.pending.clear()
                self.held.clear()
                self.ended = event
            case SessionForked(payload=p):
                self.needs_approval = frozenset(p.config.require_approval)
                self.pending.clear()
                self.held.clear()
                self.ended = None
            case UserMessageReceived():
                self.ended = None if isinstance(self.ended, SessionEnded) else self.ended  # a continuation
        return []

    def offerable(self) -> list[OfferedCall]:
        return [call for call_id, call in self.pending.items() if call_id not in self.held]


def client_calls(events: list[Event]) -> ClientCalls:
    calls = ClientCalls()
    for event in events:
        calls.apply(event)
    return calls
