"""What the session does next on its own: `next_step(state)`. Pure.

Called after every append and on wake, so a session cut off anywhere (after a user
message, mid-turn, with tool calls outstanding) carries on from the log alone. A turn is
one model call and the tool calls it asks for: turn_started → model_turn → tool_call* →
tool_result* → turn_ended. `max_turns` bounds turns over the session's whole life.
"""

from __future__ import annotations

from dataclasses import dataclass

from wakeline import events as e
from wakeline.chain import Draft
from wakeline.state import SessionState


@dataclass(frozen=True)
class CallModel:
    """The turn is waiting for the model: the only step that needs I/O to produce its drafts."""


CALL_MODEL = CallModel()
SYSTEM = "system:brain"


def next_step(state: SessionState) -> list[Draft] | CallModel | None:
    """Drafts to append, a model call to make, or None when the session waits for an input."""
    if state.status in ("new", "ended", "deleted"):
        return None
    if state.in_turn:
        if state.awaiting_model:
            return CALL_MODEL
        if state.pending_tool_calls:
            return None  # runners, whoever holds the hands, or an approval will answer
        return [_marker(e.TurnEndedPayload(turn=state.turns))]
    if state.queued:
        return [Draft(payload=e.UserMessagePayload(text=q.text, queued=True),
                      actor=q.actor, trust="instruction", causation_id=q.command_id) for q in state.queued]
    if not state.messages:
        return None
    if state.messages[-1].role == "user":
        if state.turns >= state.config.max_turns:
            return [_ended("max_turns", f"turn budget of {state.config.max_turns} used")]
        return [_marker(e.TurnStartedPayload(turn=state.turns + 1))]
    return [_ended("completed")]


def _marker(payload: e.Payload) -> Draft:
    return Draft(payload=payload, actor=SYSTEM, trust="instruction")


def _ended(reason: e.EndReason, detail: str | None = None) -> Draft:
    return _marker(e.SessionEndedPayload(reason=reason, detail=detail))


def model_drafts(state: SessionState, reply, actor: str) -> list[Draft]:
    """Records a model reply: the turn, then each tool call, then approvals it needs."""
    tool_ids = tuple(use.id for use in reply.tool_uses)
    turn = e.ModelTurnPayload(text=reply.text, reasoning=tuple(reply.reasoning), usage=reply.usage,
                              stop_reason=reply.stop_reason, tool_call_ids=tool_ids)
    drafts = [Draft(payload=turn, actor=actor, trust="instruction")]
    for use in reply.tool_uses:
        call = e.ToolCallPayload(tool_call_id=use.id, name=use.name, input=use.input)
        drafts.append(Draft(payload=call, actor=actor, trust="instruction"))
    for use in reply.tool_uses:
        if use.name in state.config.require_approval:
            ask = e.ApprovalRequestedPayload(tool_call_id=use.id, reason=f"{use.name} requires approval")
            drafts.append(_marker(ask))
    return drafts


def failed_model_drafts(detail: str) -> list[Draft]:
    return [_ended("error", detail[:2000])]
