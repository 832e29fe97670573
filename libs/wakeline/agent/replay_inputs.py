"""The inputs a recorded log spells out, rebuilt for the replay check: `recorded_input`. Pure.

An event an input caused says all of that input when it holds every field the command had:
a runner's result, a harness's result, a message (queued or not), an approval, a message
that carried a budget (its `budget_changed` and the message sealed with it), and a message
refused for its budget (all that decided it: the change it asked for, if any). Those inputs are
handed to today's `inputs.handle_input`, with the price table's answer as the log recorded it
(the price a `budget_changed` binds), so the replay check judges what today's code makes of
them. Other inputs (cancel, delete, takeover, a person's result) are taken as recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.contract.prices import DEFAULT_TABLE, ModelPrice, PriceTable
from wakeline.log.state import SessionState

Recorded = tuple[c.CommandBase | c.ToolResultReport, PriceTable]


def recorded_input(state: SessionState, events: Sequence[e.Event], i: int) -> Recorded | None:
    """The input that made `events[i]` and the prices it was handled with, where the log holds
    all of it; None where it does not."""
    event = events[i]
    if isinstance(event, e.BudgetChanged):
        return _budgeted_message(event, events[i + 1] if i + 1 < len(events) else None), _price(event.payload)
    if isinstance(event, e.InputRejected) and event.payload.code == "budget_exhausted":
        return _refused_message(event), _price(event.payload.budget_change)
    command = _command(state, event)
    return None if command is None else (command, DEFAULT_TABLE)


def _command(state: SessionState, event: e.Event) -> c.CommandBase | c.ToolResultReport | None:
    ids = {"command_id": event.causation_id or "", "session_id": event.session_id, "tenant": event.tenant,
           "actor": event.actor}
    match event:
        case e.ToolResultReceived(payload=p) if event.causation_id == c.result_input_id(p.tool_call_id):
            return c.ToolResultReport(session_id=event.session_id, tenant=event.tenant, tool_call_id=p.tool_call_id,
                                      name=p.name, output=p.output, is_error=p.is_error, error_kind=p.error_kind,
                                      duration_ms=p.duration_ms or 0, runner=event.actor.removeprefix("runner:"))
        case e.ToolResultReceived(payload=p) if p.answered_by == "client" and event.causation_id:
            # the session's harness answered over HTTP: its command is the result as recorded
            return c.SubmitToolResult(**ids, tool_call_id=p.tool_call_id, output=p.output, is_error=p.is_error)
        case e.UserMessageReceived(payload=p) if event.causation_id and not p.queued and state.status != "new":
            return c.PostMessage(**ids, text=p.text)
        case e.MessageQueued(payload=p):
            return c.PostMessage(**ids, text=p.text)
        case e.ApprovalGranted(payload=p) if event.causation_id:
            return c.ApproveToolCall(**ids, tool_call_id=p.tool_call_id)
    return None


def _budgeted_message(changed: e.BudgetChanged, message: e.Event | None) -> c.PostMessage:
    """The message whose budget `changed` records: its text is the event after it, caused by
    the same command; its caps, the budget recorded whole (it names every cap then in force)."""
    text = "(no message recorded with it)"
    if isinstance(message, (e.UserMessageReceived, e.MessageQueued)) and message.causation_id == changed.causation_id:
        text = message.payload.text
    return c.PostMessage(command_id=changed.causation_id or "", session_id=changed.session_id,
                         tenant=changed.tenant, actor=changed.actor, text=text, budget=changed.payload.budget)


def _refused_message(refused: e.InputRejected) -> c.PostMessage:
    """A message refused for its budget: what decided it (the budget it asked for, the seq it
    expected) is recorded; its text is not, and decides nothing."""
    p = refused.payload
    return c.PostMessage(command_id=p.command_id, session_id=refused.session_id, tenant=refused.tenant,
                         text="(the refused message's text is not recorded)", expected_seq=p.expected_seq,
                         budget=None if p.budget_change is None else p.budget_change.budget)


def _price(change: e.BudgetChangedPayload | None) -> PriceTable:
    return DEFAULT_TABLE if change is None else _RecordedPrice(change.price)


class _RecordedPrice(PriceTable):
    """A table that answers what the log recorded it answered (None included)."""

    def __init__(self, price: ModelPrice | None):
        super().__init__({})
        self._price = price

    def price_for(self, model: str) -> ModelPrice | None:
        return self._price
