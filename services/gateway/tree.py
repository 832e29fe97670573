"""A session's steps as a tree whose branches are the forks taken from it. Pure.

`steps(events)` reads one session's own events into steps (messages, turns, tool calls
with their outcome, approvals, compactions, forks, the end); `TreeNodePublic` nests the
forks under the session they were taken from, at the seq they start after.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel

from wakeline.contract.events import (
    ApprovalDenied, ApprovalGranted, ApprovalRequested, ContextCompacted, Event, ModelResponded, SessionEnded,
    SessionForked, ToolCallRequested, ToolResultReceived, TurnStarted, UserMessageReceived,
)

StepKind = Literal["message", "turn", "tool_call", "approval", "compaction", "forked", "ended"]


class StepPublic(BaseModel):
    seq: int
    kind: StepKind
    actor: str
    summary: str
    detail: dict[str, Any] = {}


class TreeNodePublic(BaseModel):
    session_id: str
    owner: str
    title: str | None
    status: str
    last_seq: int
    parent_session_id: str | None = None
    fork_seq: int | None = None
    steps: list[StepPublic]
    forks: list["TreeNodePublic"] = []


def steps(events: Iterable[Event]) -> list[StepPublic]:
    out: list[StepPublic] = []
    calls: dict[str, StepPublic] = {}
    for event in events:
        step = _step(event, calls)
        if step is not None:
            out.append(step)
    return out


def _step(event: Event, calls: dict[str, StepPublic]) -> StepPublic | None:
    def made(kind: StepKind, summary: str, **detail: Any) -> StepPublic:
        return StepPublic(seq=event.seq, kind=kind, actor=event.actor, summary=summary[:200], detail=detail)

    match event:
        case UserMessageReceived(payload=p):
            return made("message", p.text)
        case TurnStarted(payload=p):
            return made("turn", f"turn {p.turn}", turn=p.turn)
        case ModelResponded(payload=p):
            return made("turn", p.text or f"{len(p.tool_call_ids)} tool call(s)", usage=p.usage.model_dump(),
                        tool_call_ids=list(p.tool_call_ids))
        case ToolCallRequested(payload=p):
            calls[p.tool_call_id] = made("tool_call", p.name, tool_call_id=p.tool_call_id, outcome="pending")
            return calls[p.tool_call_id]
        case ToolResultReceived(payload=p):
            call = calls.get(p.tool_call_id)
            if call is not None:  # the outcome goes on the call's step
                call.detail.update(outcome="error" if p.is_error else "ok", result_seq=event.seq,
                                   error_kind=p.error_kind, duration_ms=p.duration_ms)
            return None
        case ApprovalRequested(payload=p) | ApprovalGranted(payload=p) | ApprovalDenied(payload=p):
            return made("approval", event.type, tool_call_id=p.tool_call_id)
        case ContextCompacted(payload=p):
            return made("compaction", f"seq {p.covered_from_seq}..{p.covered_to_seq} summarized",
                        tokens_before=p.tokens_before, tokens_after=p.tokens_after)
        case SessionForked(payload=p):
            return made("forked", f"from {p.parent_session_id} at seq {p.fork_seq}",
                        parent_session_id=p.parent_session_id, fork_seq=p.fork_seq)
        case SessionEnded(payload=p):
            return made("ended", p.reason, detail=p.detail)
    return None
