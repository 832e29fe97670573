"""What an input does to a session: `handle_input(state, input) -> drafts`. Pure.

Inputs are commands from `wakeline.inbox` and tool results from `wakeline.tool-results`.
An input already in the log yields nothing, so redelivery after a crash is a no-op: a
command whose id the session has seen (`SessionState.has_seen`), or a result for a call
that is no longer pending (recording a result resolves its call, so the pending check is
the whole of a result's dedupe; docs/architecture.md, "What a session remembers of its inputs").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wakeline.agent.budget import budget_change, budget_refusal
from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.contract.prices import DEFAULT_TABLE, PriceTable
from wakeline.log.chain import Draft
from wakeline.log.state import SessionState


def input_id(item: c.CommandBase | c.ToolResultReport) -> str:
    if isinstance(item, c.ToolResultReport):
        return c.result_input_id(item.tool_call_id)
    return item.command_id


def handle_input(state: SessionState, item: c.CommandBase | c.ToolResultReport,
                 prices: PriceTable = DEFAULT_TABLE) -> list[Draft]:
    """`prices`: the table a new budget binds its session's price from (the brain's settings';
    the replay check's, the price the log recorded)."""
    if isinstance(item, c.ToolResultReport):
        return _tool_result(state, item)
    if state.has_seen(item.command_id):
        return []
    if state.status == "new":
        return _create(item, prices) if isinstance(item, c.CreateSession) else []
    refusal = _refusal(state, item)
    if refusal:
        return [_rejected(item, *refusal)]
    if isinstance(item, c.PostMessage):
        return _post(state, item, prices)
    return _HANDLERS[type(item)](state, item)


def _refusal(state: SessionState, cmd: c.CommandBase) -> tuple[e.RejectionCode, str] | None:
    if cmd.tenant != state.tenant:
        return "wrong_tenant", "session belongs to another tenant"
    if state.status == "deleted":
        return "deleted", "session is deleted"
    if cmd.expected_seq is not None and cmd.expected_seq != state.last_seq:
        return "conflict", f"conflict: expected_seq {cmd.expected_seq} but the session is at seq {state.last_seq}"
    if isinstance(cmd, c.CreateSession):
        return "already_exists", "session already exists"
    return None


def _draft(payload: e.Payload, actor: str, causation_id: str | None, trust: e.Trust = "instruction") -> Draft:
    return Draft(payload=payload, actor=actor, trust=trust, causation_id=causation_id)


def _rejected(cmd: c.CommandBase, code: e.RejectionCode, reason: str,
              budget_change: e.BudgetChangedPayload | None = None) -> Draft:
    payload = e.InputRejectedPayload(command_id=cmd.command_id, code=code, reason=reason,
                                     expected_seq=cmd.expected_seq, budget_change=budget_change)
    return _draft(payload, "system:brain", cmd.command_id)


def _create(cmd: c.CreateSession, prices: PriceTable) -> list[Draft]:
    # A budget binds the price the session's calls are charged at, so its log decides alone.
    price = prices.price_for(cmd.config.model) if cmd.config.budget is not None else None
    created = e.SessionCreatedPayload(config=cmd.config, owner=cmd.actor, title=cmd.title, price=price)
    drafts = [_draft(created, cmd.actor, cmd.command_id)]
    if cmd.message:
        drafts.append(_draft(e.UserMessagePayload(text=cmd.message), cmd.actor, cmd.command_id))
    return drafts


def _post(state: SessionState, cmd: c.PostMessage, prices: PriceTable) -> list[Draft]:
    """The budget the message carries first (`budget_changed`), then the message; refused
    whole while the budget in force after it is spent (`agent.budget`)."""
    change = None if cmd.budget is None else budget_change(state, cmd.budget, prices.price_for(state.config.model))
    refusal = budget_refusal(state, change)
    if refusal is not None:
        return [_rejected(cmd, "budget_exhausted", refusal, change)]
    drafts = [] if change is None else [_draft(change, cmd.actor, cmd.command_id)]
    if state.in_turn:
        queued = e.MessageQueuedPayload(command_id=cmd.command_id, text=cmd.text)
        return drafts + [_draft(queued, cmd.actor, cmd.command_id)]
    return drafts + [_draft(e.UserMessagePayload(text=cmd.text), cmd.actor, cmd.command_id)]


def _ended(state: SessionState, cmd: c.CommandBase) -> list[Draft]:
    """An ended session's calls wait for nothing: its turn is over (cancelled, say) while the
    fold still lists what it awaited, so a grant or denial now would act on a dead turn."""
    return [_rejected(cmd, "already_ended", "session has already ended: its tool calls await no approval")]


def _approve(state: SessionState, cmd: c.ApproveToolCall) -> list[Draft]:
    if state.status == "ended":
        return _ended(state, cmd)
    if cmd.tool_call_id not in state.awaiting_approval:
        return [_rejected(cmd, "not_awaiting_approval", f"tool call {cmd.tool_call_id} is not awaiting approval")]
    return [_draft(e.ApprovalGrantedPayload(tool_call_id=cmd.tool_call_id), cmd.actor, cmd.command_id)]


def _deny(state: SessionState, cmd: c.DenyToolCall) -> list[Draft]:
    if state.status == "ended":
        return _ended(state, cmd)
    if cmd.tool_call_id not in state.awaiting_approval:
        return [_rejected(cmd, "not_awaiting_approval", f"tool call {cmd.tool_call_id} is not awaiting approval")]
    call = next(p for p in state.pending_tool_calls if p.tool_call_id == cmd.tool_call_id)
    denied = e.ApprovalDeniedPayload(tool_call_id=cmd.tool_call_id, reason=cmd.reason)
    output = f"denied by {cmd.actor}: {cmd.reason or 'no reason given'}"
    result = e.ToolResultPayload(tool_call_id=call.tool_call_id, name=call.name, is_error=True,
                                 error_kind="denied", output=output)
    return [_draft(denied, cmd.actor, cmd.command_id),
            _draft(result, cmd.actor, None, trust="data")]


def _cancel(state: SessionState, cmd: c.CommandBase) -> list[Draft]:
    if state.status == "ended":
        return [_rejected(cmd, "already_ended", "session has already ended")]
    return [_draft(e.SessionEndedPayload(reason="cancelled"), cmd.actor, cmd.command_id)]


def _delete(state: SessionState, cmd: c.DeleteSession) -> list[Draft]:
    drafts = []
    if state.status == "running":  # a running turn is stopped first
        drafts.append(_draft(e.SessionEndedPayload(reason="cancelled", detail="deleted"),
                             cmd.actor, None))
    drafts.append(_draft(e.DeletedPayload(by=cmd.actor, reason=cmd.reason), cmd.actor, cmd.command_id))
    return drafts


def _wake(state: SessionState, cmd: c.WakeSession) -> list[Draft]:
    woke = e.WokePayload(host="", reason="requested", from_seq=state.last_seq)
    return [_draft(woke, cmd.actor, cmd.command_id)]


def _take_over(state: SessionState, cmd: c.CommandBase) -> list[Draft]:
    if isinstance(cmd, c.TakeOver):
        return [_draft(e.TakeoverPayload(by=cmd.actor), cmd.actor, cmd.command_id)]
    return [_draft(e.HandbackPayload(by=cmd.actor), cmd.actor, cmd.command_id)]


def _submit(state: SessionState, cmd: c.SubmitToolResult) -> list[Draft]:
    call = next((p for p in state.pending_tool_calls if p.tool_call_id == cmd.tool_call_id), None)
    if call is not None and call.answered_by == "client":
        return _client_result(state, cmd, call)
    if state.hands is None or call is None:
        return [_rejected(cmd, "not_pending", "no one holds the hands, or the tool call is not pending")]
    result = e.ToolResultPayload(tool_call_id=call.tool_call_id, name=call.name, output=cmd.output,
                                 is_error=cmd.is_error)
    return [_draft(result, cmd.actor, cmd.command_id, trust="data")]


def _client_result(state: SessionState, cmd: c.SubmitToolResult, call: e.ToolCallPayload) -> list[Draft]:
    """The session's own harness answers a declared tool's call; the actor is the key's
    principal as a harness (`user:` or `service:`), never `human:`: nobody took the hands."""
    if call.tool_call_id in state.awaiting_approval:
        return [_rejected(cmd, "not_pending", f"tool call {call.tool_call_id} awaits approval first")]
    result = e.ToolResultPayload(tool_call_id=call.tool_call_id, name=call.name, output=cmd.output,
                                 is_error=cmd.is_error, answered_by="client")
    return [_draft(result, harness_actor(cmd.actor), cmd.command_id, trust="data")]


def harness_actor(actor: str) -> str:
    """The gateway sends results as the hands (`human:<principal>` for a user's key); a harness
    answering its own session's call acts as the key's principal, `user:<principal>`."""
    return "user:" + actor.removeprefix("human:") if actor.startswith("human:") else actor


def _tool_result(state: SessionState, report: c.ToolResultReport) -> list[Draft]:
    calls = {p.tool_call_id: p for p in state.pending_tool_calls}
    if calls.get(report.tool_call_id) is not None and calls[report.tool_call_id].answered_by == "client":
        return []  # a declared tool's call is the harness's to answer, never a runner's
    pending = set(calls)
    if report.tool_call_id not in pending or state.hands is not None:
        return []  # a duplicate delivery, or whoever holds the hands answers it now
    result = e.ToolResultPayload(tool_call_id=report.tool_call_id, name=report.name, output=report.output,
                                 is_error=report.is_error, error_kind=report.error_kind,
                                 duration_ms=report.duration_ms)
    return [_draft(result, f"runner:{report.runner}", input_id(report), trust="data")]


# each handler takes the command of its own type
_HANDLERS: dict[type[c.CommandBase], Callable[[SessionState, Any], list[Draft]]] = {
    c.ApproveToolCall: _approve, c.DenyToolCall: _deny,
    c.CancelSession: _cancel, c.DeleteSession: _delete, c.WakeSession: _wake,
    c.TakeOver: _take_over, c.HandBack: _take_over, c.SubmitToolResult: _submit,
}
