"""`fold(events) -> SessionState`: the only way a session's state comes to exist.

Pure: no clock, no randomness, no I/O; the same events give the same state on every host
and every replay. Markers (turn boundaries, woke, titles, file references, queueing) may
update bookkeeping but never the conversation. What to *do* given a state lives in the
brain, not here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from wakeline.events import (
    ApprovalDenied, ApprovalGranted, ApprovalRequested, ContextCompacted, Event, FileReferenced,
    HandsHandedBack, HandsTakenOver, InputRejected, MessageQueued, ModelResponded, ModelTurnPayload,
    SessionCreated, SessionDeleted, SessionEnded, TitleGenerated, ToolCallPayload, ToolCallRequested,
    ToolResultPayload, ToolResultReceived, TurnEnded, TurnStarted, UserMessageReceived, Usage, Woke,
)
from wakeline.state import (
    Message, QueuedMessage, SessionState, TextBlock, ToolResultBlock, ToolUseBlock, evolve,
)
from wakeline.status import session_status


class FoldError(ValueError):
    """The events do not form a session: out of order, or foreign to it."""


def fold(events: Iterable[Event], state: SessionState | None = None) -> SessionState:
    state = state or SessionState()
    for event in events:
        state = apply(state, event)
    return state


def apply(state: SessionState, event: Event) -> SessionState:
    if event.seq != state.last_seq + 1:
        raise FoldError(f"expected seq {state.last_seq + 1}, got {event.seq}")
    if state.session_id and event.session_id != state.session_id:
        raise FoldError(f"event of {event.session_id} folded into {state.session_id}")
    state = _applied(state, event)
    seen = state.seen_inputs | {event.causation_id} if event.causation_id else state.seen_inputs
    return evolve(state, last_seq=event.seq, last_hash=event.hash, seen_inputs=seen,
                  status=session_status(deleted=state.deleted_by is not None,
                                        ended=state.ended_reason is not None,
                                        in_turn=state.in_turn, created=bool(state.session_id)))


def _applied(s: SessionState, e: Event) -> SessionState:
    match e:
        case SessionCreated(payload=p):
            return evolve(s, session_id=e.session_id, tenant=e.tenant, owner=p.owner, config=p.config,
                          title=p.title, parent_session_id=p.parent_session_id, fork_seq=p.fork_seq)
        case UserMessageReceived(payload=p):
            message = Message("user", (TextBlock(p.text),), e.seq)
            queued = tuple(q for q in s.queued if q.command_id != e.causation_id)
            # A message to a finished session continues it: the turn budget carries over.
            return evolve(s, messages=s.messages + (message,), queued=queued, ended_reason=None)
        case MessageQueued(payload=p):
            return evolve(s, queued=s.queued + (QueuedMessage(p.command_id, p.text, e.actor),))
        case ModelResponded(payload=p):
            return _model_turn(s, e.seq, p)
        case ToolCallRequested(payload=p):
            return _tool_call(s, e.seq, p)
        case ToolResultReceived(payload=p):
            return _tool_result(s, e.seq, p)
        case ContextCompacted(payload=p):
            summary = Message("user", (TextBlock(f"[Summary of earlier conversation]\n{p.summary}"),), e.seq)
            kept = tuple(m for m in s.messages if m.seq > p.covered_to_seq)
            return evolve(s, messages=(summary,) + kept, compactions=s.compactions + 1)
        case TurnStarted():
            return evolve(s, turns=s.turns + 1, in_turn=True, awaiting_model=True)
        case TurnEnded():
            return evolve(s, in_turn=False, awaiting_model=False)
        case ApprovalRequested(payload=p):
            return evolve(s, awaiting_approval=s.awaiting_approval | {p.tool_call_id})
        case ApprovalGranted(payload=p) | ApprovalDenied(payload=p):
            return evolve(s, awaiting_approval=s.awaiting_approval - {p.tool_call_id})
        case SessionEnded(payload=p):
            return evolve(s, ended_reason=p.reason, in_turn=False, awaiting_model=False)
        case HandsTakenOver(payload=p):
            return evolve(s, hands=p.by)
        case HandsHandedBack():
            return evolve(s, hands=None)
        case TitleGenerated(payload=p):
            return evolve(s, title=p.title)
        case FileReferenced(payload=p):
            return evolve(s, files=s.files + (p.path,))
        case SessionDeleted(payload=p):
            return evolve(s, deleted_by=p.by, in_turn=False, awaiting_model=False)
        case Woke() | InputRejected():
            return s  # bookkeeping: in the log, nothing to the conversation
    raise FoldError(f"no fold for event type {e.type!r}")  # unreachable while Event is closed


def _model_turn(state: SessionState, seq: int, p: ModelTurnPayload) -> SessionState:
    blocks = (TextBlock(p.text),) if p.text else ()
    usage = Usage(input_tokens=state.usage.input_tokens + p.usage.input_tokens,
                  output_tokens=state.usage.output_tokens + p.usage.output_tokens)
    return evolve(state, messages=state.messages + (Message("assistant", blocks, seq),), usage=usage,
                  awaiting_model=False)


def _tool_call(state: SessionState, seq: int, p: ToolCallPayload) -> SessionState:
    block = ToolUseBlock(p.tool_call_id, p.name, p.input)
    messages = state.messages
    if messages and messages[-1].role == "assistant":
        last = messages[-1]
        messages = messages[:-1] + (replace(last, blocks=last.blocks + (block,)),)
    else:
        messages = messages + (Message("assistant", (block,), seq),)
    return evolve(state, messages=messages, pending_tool_calls=state.pending_tool_calls + (p,))


def _tool_result(state: SessionState, seq: int, p: ToolResultPayload) -> SessionState:
    pending = tuple(c for c in state.pending_tool_calls if c.tool_call_id != p.tool_call_id)
    block = ToolResultBlock(p.tool_call_id, p.output, p.is_error)
    messages = state.messages
    last = messages[-1] if messages else None
    if last is not None and last.role == "user" and all(isinstance(b, ToolResultBlock) for b in last.blocks):
        messages = messages[:-1] + (replace(last, blocks=last.blocks + (block,)),)
    else:
        messages = messages + (Message("user", (block,), seq),)
    return evolve(state, messages=messages, pending_tool_calls=pending,
                  awaiting_approval=state.awaiting_approval - {p.tool_call_id})
