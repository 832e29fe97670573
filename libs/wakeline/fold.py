"""`fold(events) -> SessionState`: the only way a session's state comes to exist.

Pure: no clock, no randomness, no I/O; the same events give the same state on every host
and every replay. Markers (turn boundaries, woke, titles, file references, queueing) may
update bookkeeping but never the conversation. What to *do* given a state lives in the
brain, not here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable

from wakeline.events import EventBase, Usage
from wakeline.state import (
    Message, QueuedMessage, SessionState, TextBlock, ToolResultBlock, ToolUseBlock, evolve,
)


class FoldError(ValueError):
    """The events do not form a session: out of order, or foreign to it."""


def fold(events: Iterable[EventBase], state: SessionState | None = None) -> SessionState:
    state = state or SessionState()
    for event in events:
        state = apply(state, event)
    return state


def apply(state: SessionState, event: EventBase) -> SessionState:
    if event.seq != state.last_seq + 1:
        raise FoldError(f"expected seq {state.last_seq + 1}, got {event.seq}")
    if state.session_id and event.session_id != state.session_id:
        raise FoldError(f"event of {event.session_id} folded into {state.session_id}")
    handler = _HANDLERS.get(event.type, _ignore)  # type: ignore[attr-defined]
    state = handler(state, event)
    seen = state.seen_inputs | {event.causation_id} if event.causation_id else state.seen_inputs
    return evolve(state, last_seq=event.seq, last_hash=event.hash, seen_inputs=seen,
                   status=_status(state))


def _status(state: SessionState) -> str:
    if state.deleted_by is not None:
        return "deleted"
    if state.ended_reason is not None:
        return "ended"
    if state.in_turn:
        return "running"
    return "idle" if state.session_id else "new"


def _ignore(state: SessionState, event: EventBase) -> SessionState:
    return state


def _created(state: SessionState, e: EventBase) -> SessionState:
    p = e.payload
    return evolve(state, session_id=e.session_id, tenant=e.tenant, owner=p.owner, config=p.config,
                   title=p.title, parent_session_id=p.parent_session_id, fork_seq=p.fork_seq)


def _user_message(state: SessionState, e: EventBase) -> SessionState:
    message = Message("user", (TextBlock(e.payload.text),), e.seq)
    queued = tuple(q for q in state.queued if q.command_id != e.causation_id)
    # A message to a finished session continues it: the turn budget carries over.
    return evolve(state, messages=state.messages + (message,), queued=queued, ended_reason=None)


def _queued(state: SessionState, e: EventBase) -> SessionState:
    item = QueuedMessage(e.payload.command_id, e.payload.text, e.actor)
    return evolve(state, queued=state.queued + (item,))


def _model_turn(state: SessionState, e: EventBase) -> SessionState:
    p = e.payload
    blocks = (TextBlock(p.text),) if p.text else ()
    usage = Usage(input_tokens=state.usage.input_tokens + p.usage.input_tokens,
                  output_tokens=state.usage.output_tokens + p.usage.output_tokens)
    return evolve(state, messages=state.messages + (Message("assistant", blocks, e.seq),), usage=usage,
                   awaiting_model=False)


def _tool_call(state: SessionState, e: EventBase) -> SessionState:
    p = e.payload
    block = ToolUseBlock(p.tool_call_id, p.name, p.input)
    messages = state.messages
    if messages and messages[-1].role == "assistant":
        last = messages[-1]
        messages = messages[:-1] + (replace(last, blocks=last.blocks + (block,)),)
    else:
        messages = messages + (Message("assistant", (block,), e.seq),)
    return evolve(state, messages=messages, pending_tool_calls=state.pending_tool_calls + (p,))


def _tool_result(state: SessionState, e: EventBase) -> SessionState:
    p = e.payload
    pending = tuple(c for c in state.pending_tool_calls if c.tool_call_id != p.tool_call_id)
    block = ToolResultBlock(p.tool_call_id, p.output, p.is_error)
    messages = state.messages
    last = messages[-1] if messages else None
    if last is not None and last.role == "user" and all(isinstance(b, ToolResultBlock) for b in last.blocks):
        messages = messages[:-1] + (replace(last, blocks=last.blocks + (block,)),)
    else:
        messages = messages + (Message("user", (block,), e.seq),)
    return evolve(state, messages=messages, pending_tool_calls=pending,
                   awaiting_approval=state.awaiting_approval - {p.tool_call_id})


def _compaction(state: SessionState, e: EventBase) -> SessionState:
    p = e.payload
    summary = Message("user", (TextBlock(f"[Summary of earlier conversation]\n{p.summary}"),), e.seq)
    kept = tuple(m for m in state.messages if m.seq > p.covered_to_seq)
    return evolve(state, messages=(summary,) + kept, compactions=state.compactions + 1)


_HANDLERS: dict[str, Callable[[SessionState, EventBase], SessionState]] = {
    "session_created": _created,
    "user_message": _user_message,
    "message_queued": _queued,
    "model_turn": _model_turn,
    "tool_call": _tool_call,
    "tool_result": _tool_result,
    "compaction": _compaction,
    "turn_started": lambda s, e: evolve(s, turns=s.turns + 1, in_turn=True, awaiting_model=True),
    "turn_ended": lambda s, e: evolve(s, in_turn=False, awaiting_model=False),
    "approval_requested": lambda s, e: evolve(s, awaiting_approval=s.awaiting_approval | {e.payload.tool_call_id}),
    "approval_granted": lambda s, e: evolve(s, awaiting_approval=s.awaiting_approval - {e.payload.tool_call_id}),
    "approval_denied": lambda s, e: evolve(s, awaiting_approval=s.awaiting_approval - {e.payload.tool_call_id}),
    "session_ended": lambda s, e: evolve(s, ended_reason=e.payload.reason, in_turn=False, awaiting_model=False),
    "takeover": lambda s, e: evolve(s, hands=e.payload.by),
    "handback": lambda s, e: evolve(s, hands=None),
    "title_generated": lambda s, e: evolve(s, title=e.payload.title),
    "file_reference": lambda s, e: evolve(s, files=s.files + (e.payload.path,)),
    "deleted": lambda s, e: evolve(s, deleted_by=e.payload.by, in_turn=False, awaiting_model=False),
}
