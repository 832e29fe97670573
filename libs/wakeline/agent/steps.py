"""What the session does next on its own: `next_step(state)`. Pure.

Called after every append and on wake, so a session cut off anywhere (after a user
message, mid-turn, with tool calls outstanding) carries on from the log alone. A turn is
one model call and the tool calls it asks for: turn_started → model_turn → tool_call* →
tool_result* → turn_ended. `max_turns` bounds turns over the session's whole life; the
budget in force stops the session before a model call once it is reached (`budget.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from wakeline.contract import events as e
from wakeline.log.chain import Draft
from wakeline.contract.declared_tools import input_problems
from wakeline.log.state import SessionState
from wakeline.contract.tools import TOOLS
from wakeline.agent.budget import budget_end
from wakeline.agent.model import ModelReply, ToolUse


@dataclass(frozen=True)
class CallModel:
    """The turn is waiting for the model: the only step that needs I/O to produce its drafts."""


CALL_MODEL = CallModel()
SYSTEM = "system:brain"
Step = list[Draft] | CallModel | None


def next_step(state: SessionState) -> Step:
    """Drafts to append, a model call to make, or None when the session waits for an input."""
    if state.status in ("new", "ended", "deleted"):
        return None
    if state.in_turn:
        if state.memory_call is not None:
            return None  # the brain's read of the memory file, for a compaction, is out
        if state.awaiting_model:
            # The turn's start checked the budget; a paused turn's next call, or the call after
            # a summary the model wrote, may find it spent since.
            ended = budget_end(state)
            return [ended] if ended else CALL_MODEL
        if state.pending_tool_calls:
            return None  # runners, whoever holds the hands, or an approval will answer
        return [_marker(e.TurnEndedPayload(turn=state.turns, stop_reason=_turn_stop(state)))]
    if state.awaiting_slot:
        return None  # its turn waits for a running-session slot: the brain's grant is the input
    if state.queued:
        return [Draft(payload=e.UserMessagePayload(text=q.text, queued=True),
                      actor=q.actor, trust="instruction", causation_id=q.command_id) for q in state.queued]
    if not state.messages:
        return None
    if state.messages[-1].role == "user":
        if state.turns >= state.config.max_turns:
            return [_ended("max_turns", f"turn budget of {state.config.max_turns} used")]
        ended = budget_end(state)
        return [ended] if ended else [_marker(e.TurnStartedPayload(turn=state.turns + 1))]
    if state.stop_reason == "refusal":
        return [_ended("completed", "the model refused to go on (stop_reason refusal)")]
    if state.stop_reason == "max_tokens":
        return [_ended("completed", f"the model's reply was cut at max_tokens ({state.config.max_tokens})")]
    return [_ended("completed")]


def _turn_stop(state: SessionState) -> str:
    """Why the turn ended, as `turn_ended` records it: the model's own reason when it is one a
    reader must see (it refused, or its reply was cut), else `end_turn`. Not the last reply's
    `tool_use`: a turn that ends after its tool results ended normally, and every turn
    recorded before stop reasons existed says `end_turn`, so replaying those logs against
    this code (`replay_check`) finds no divergence here."""
    return state.stop_reason if state.stop_reason in ("refusal", "max_tokens") else "end_turn"


def _marker(payload: e.Payload) -> Draft:
    return Draft(payload=payload, actor=SYSTEM, trust="instruction")


def _ended(reason: e.EndReason, detail: str | None = None) -> Draft:
    return _marker(e.SessionEndedPayload(reason=reason, detail=detail))


def model_drafts(state: SessionState, reply: ModelReply, actor: str) -> list[Draft]:
    """Records a model reply: the turn (its blocks as returned), then each tool call, then
    an error result for each call that cannot run, then approvals the others need.

    A call cannot run when its input fails the tool's model (or the tool is not the
    session's), or when the reply was cut at max_tokens and it is the last block (its input
    may be cut short): the model gets an error `tool_result` saying so and the turn goes
    on, so it can ask again. Nothing the model sends ends the session by itself."""
    tool_ids = tuple(use.id for use in reply.tool_uses)
    # With blocks, the thinking is in them: `reasoning` would hold it a second time in a
    # record bounded by max_record_bytes (readers take it from the blocks: `reasoning_of`).
    turn = e.ModelTurnPayload(text=reply.text, reasoning=() if reply.blocks else tuple(reply.reasoning),
                              usage=reply.usage, stop_reason=reply.stop_reason, tool_call_ids=tool_ids,
                              blocks=tuple(reply.blocks))
    drafts = [Draft(payload=turn, actor=actor, trust="instruction")]
    declared = state.config.declared_tools()
    for use in reply.tool_uses:
        call = e.ToolCallPayload(tool_call_id=use.id, name=use.name, input=use.input,
                                 answered_by="client" if use.name in declared else None)
        drafts.append(Draft(payload=call, actor=actor, trust="instruction"))
    refused = {}
    for i, use in enumerate(reply.tool_uses):
        problem = _unrunnable(state, use, cut=reply.stop_reason == "max_tokens" and i == len(reply.tool_uses) - 1)
        if problem is not None:
            refused[use.id] = problem
            kind, message = problem
            output = json.dumps({"error_kind": kind, "message": message})
            result = e.ToolResultPayload(tool_call_id=use.id, name=use.name, output=output, is_error=True,
                                         error_kind=kind, duration_ms=0,
                                         answered_by="client" if use.name in declared else None)
            drafts.append(Draft(payload=result, actor=SYSTEM, trust="data"))
    for use in reply.tool_uses:
        if use.name in state.config.require_approval and use.id not in refused:
            ask = e.ApprovalRequestedPayload(tool_call_id=use.id, reason=f"{use.name} requires approval")
            drafts.append(_marker(ask))
    return drafts


def _unrunnable(state: SessionState, use: ToolUse, cut: bool) -> tuple[str, str] | None:
    """(error kind, message) when the call cannot run; None when it can."""
    if cut:
        return ("max_tokens", f"not run: the reply hit max_tokens ({state.config.max_tokens}) while this call "
                              "was being written, so its input may be incomplete; ask again with a shorter reply")
    declared = state.config.declared_tools().get(use.name)
    if declared is not None:
        problems = input_problems(declared, use.input)
        if problems is None:
            return None
        return ("invalid_input", f"not run: the input does not fit {use.name}'s schema: {problems}"[:2000])
    if use.name not in state.config.builtin_tools() or use.name not in TOOLS:
        return ("unknown_tool", f"not run: no tool {use.name!r} in this session (tools: "
                                f"{', '.join(state.config.tool_names())})")
    try:
        TOOLS[use.name][0].model_validate(use.input)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(str(p) for p in x['loc']) or 'input'}: {x['msg']}" for x in err.errors())
        return ("invalid_input", f"not run: the input does not fit {use.name}'s schema: {problems}"[:2000])
    return None


def failed_model_drafts(detail: str) -> list[Draft]:
    return [_ended("error", detail[:2000])]


def client_timeout_drafts(state: SessionState, tool_call_id: str) -> list[Draft]:
    """The error result for a declared tool's call no harness answered within the config's
    `client_tool_timeout_s`; nothing if it was answered (or the session ended) meanwhile."""
    call = next((c for c in state.pending_tool_calls if c.tool_call_id == tool_call_id), None)
    if call is None or call.answered_by != "client" or state.status in ("ended", "deleted"):
        return []
    waited = state.config.client_tool_timeout_s
    message = f"no harness answered this call within {waited:g} s (client_tool_timeout_s)"
    output = json.dumps({"error_kind": "no_harness", "message": message})
    result = e.ToolResultPayload(tool_call_id=call.tool_call_id, name=call.name, output=output, is_error=True,
                                 error_kind="no_harness", answered_by="client")
    return [Draft(payload=result, actor=SYSTEM, trust="data")]
