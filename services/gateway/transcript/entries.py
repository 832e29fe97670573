"""A transcript's entries: one `Entry` per event that is not a marker, with its role, label
and text, and the JSON form (`render_json`). What the renderers share lives here too:
the session facts shown at the top (`FACTS`), `label` and `title_of`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Literal, Mapping

from wakeline.contract.budget import Budget
from wakeline.contract.events import (
    ApprovalDenied, ApprovalGranted, ApprovalRequested, BudgetChanged, ContextCompacted, Event, HandsHandedBack,
    HandsTakenOver, InputRejected, ModelResponded, ModelUnavailable, SessionCreated, SessionDeleted, SessionEnded,
    SessionForked, ToolCallRequested, ToolResultReceived, UserMessageReceived, is_marker, reasoning_of,
)

Role = Literal["user", "assistant", "tool", "system"]
FACTS = ("session_id", "owner", "model", "status", "last_seq", "created_at", "ended_reason",
         "parent_session_id", "fork_seq")


@dataclass(frozen=True)
class Entry:
    seq: int
    type: str
    role: Role
    actor: str
    trust: str
    ts: str
    text: str
    tool_name: str | None = None
    tool_call_id: str | None = None
    is_error: bool = False
    reasoning: tuple[str, ...] = ()
    # "client" for a declared tool's call and result (the session's own harness answers it).
    answered_by: str | None = None
    # For a fork: the session this entry's event belongs to when it is the parent's (the
    # inherited prefix, read from the parent), else None.
    inherited_from: str | None = None


def entries(events: Iterable[Event], own_session: str | None = None) -> list[Entry]:
    """Entries of the events that are not markers; with `own_session` (a fork's id), the
    events of any other session are its inherited prefix and marked so."""
    return [to_entry(event, own_session) for event in events if not is_marker(event)]


def to_entry(event: Event, own_session: str | None = None) -> Entry:
    extra: dict[str, Any] = {}
    match event:
        case ToolCallRequested(payload=p):
            extra = {"tool_name": p.name, "tool_call_id": p.tool_call_id, "is_error": False,
                     "answered_by": p.answered_by}
        case ToolResultReceived(payload=p):
            extra = {"tool_name": p.name, "tool_call_id": p.tool_call_id, "is_error": p.is_error,
                     "answered_by": p.answered_by}
        case ModelResponded(payload=p):
            extra = {"reasoning": reasoning_of(p)}
    if own_session is not None and event.session_id != own_session:
        extra["inherited_from"] = event.session_id
    return Entry(seq=event.seq, type=event.type, role=_ROLES.get(event.type, "system"), actor=event.actor,
                 trust=event.trust, ts=event.ts.isoformat(), text=_text(event), **extra)


_ROLES: dict[str, Role] = {"user_message": "user", "model_turn": "assistant", "tool_call": "assistant",
                           "tool_result": "tool"}


def _with(text: str, detail: str | None) -> str:
    return f"{text}: {detail}" if detail else text


def _text(event: Event) -> str:
    match event:
        case SessionForked(payload=p):
            return f"forked from {p.parent_session_id} at seq {p.fork_seq} (hash {p.parent_hash[:16]}…)"
        case SessionCreated(payload=p):
            c = p.config
            return (f"model {c.model}, up to {c.max_turns} turns, tools: {', '.join(c.tool_names()) or 'none'}\n\n"
                    f"System prompt:\n{c.system_prompt}")
        case UserMessageReceived(payload=p) | ModelResponded(payload=p):
            return p.text
        case ToolCallRequested(payload=p):
            return json.dumps(p.input, indent=2, sort_keys=True, ensure_ascii=False)
        case ToolResultReceived(payload=p):
            return p.output
        case ContextCompacted(payload=p):
            return (f"seq {p.covered_from_seq}-{p.covered_to_seq} summarized "
                    f"({p.tokens_before} -> {p.tokens_after} tokens)\n\n{p.summary}")
        case ApprovalRequested(payload=p):
            return _with(f"approval requested for {p.tool_call_id}", p.reason)
        case ApprovalGranted(payload=p):
            return f"approved {p.tool_call_id}"
        case ApprovalDenied(payload=p):
            return _with(f"denied {p.tool_call_id}", p.reason)
        case SessionEnded(payload=p):
            return _with(f"session ended ({p.reason})", p.detail)
        case HandsTakenOver(payload=p):
            return f"{p.by} took over as the hands"
        case HandsHandedBack(payload=p):
            return f"{p.by} handed the tool calls back to the runners"
        case InputRejected(payload=p):
            return f"rejected command {p.command_id}: {p.reason}"
        case SessionDeleted(payload=p):
            return _with(f"deleted by {p.by}", p.reason)
        case ModelUnavailable(payload=p):
            return f"the model is unavailable (attempt {p.attempt}); calling again in {p.retry_in_s:g} s: {p.error}"
        case BudgetChanged(payload=p):
            was = f" (was {_caps(p.previous)})" if p.previous else ""
            return f"budget set by {event.actor}: {_caps(p.budget)}{was}"
    return json.dumps(event.payload.model_dump(mode="json"), sort_keys=True)


def _caps(budget: Budget) -> str:
    return ", ".join(f"{cap} {value}" for cap, value in budget.model_dump().items())


def label(entry: Entry) -> str:
    harness = ", for the harness" if entry.answered_by == "client" else ""
    if entry.type == "tool_call":
        return f"tool call {entry.tool_name} ({entry.tool_call_id}{harness})"
    if entry.type == "tool_result":
        return f"tool {'error' if entry.is_error else 'result'} {entry.tool_name} ({entry.tool_call_id}{harness})"
    return entry.type.replace("_", " ")


def title_of(session: Mapping[str, Any]) -> str:
    return session.get("title") or f"Session {session.get('session_id', '')}"


def render_json(session: Mapping[str, Any], items: Iterable[Entry]) -> dict[str, Any]:
    return {"session": dict(session),
            "entries": [asdict(entry) | {"reasoning": list(entry.reasoning)} for entry in items]}
