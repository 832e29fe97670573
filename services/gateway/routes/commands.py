"""Commands to an existing session: messages, wake, cancel, approvals and denials.

Each sends one command to `wakeline.inbox` and waits (bounded) for the event it causes.
A message answers 202 even when recorded: the turn it starts runs on.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from wakeline.contract.commands import (
    ApproveToolCall, CancelSession, DenyToolCall, HandBack, PostMessage, TakeOver, WakeSession,
)
from wakeline_gateway.auth import Caller
from wakeline_gateway.bounds import ToolCallIdPath
from wakeline_gateway.deps import DispatcherDep, IdempotencyKey, WritableSessionDep, Writer
from wakeline_gateway.idempotency import new_command_id
from wakeline_gateway.problem import responses
from wakeline_gateway.shapes.commands import CommandPublic, DenialCreate, MessageCreate
from wakeline_gateway.shapes.sessions import SessionPublic

# Every command can be refused by the brain (its code decides 404/409/413/422), be too large,
# find the tenant over a rate quota (429), or find Kafka down; 202 is "sent, no outcome
# recorded within the wait".
router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["commands"],
                   responses=responses(401, 403, 404, 409, 413, 422, 429, 500, 503))
PENDING = {202: {"model": CommandPublic, "description": "Sent; no outcome recorded within the wait."}}


def _ids(session: SessionPublic, caller: Caller, *, hands: bool = False) -> dict[str, Any]:
    """Tenant and actor come from the key, never from the request; an Idempotency-Key
    replaces the fresh command id (dispatch -> idempotency.keyed)."""
    return {"command_id": new_command_id(), "session_id": session.session_id, "tenant": caller.tenant,
            "actor": caller.hands if hands else caller.actor}


def _status(response: Response, answer: CommandPublic) -> CommandPublic:
    response.status_code = 200 if answer.status == "done" else 202
    return answer


@router.post("/messages", status_code=202, response_model=CommandPublic)
async def post_message(body: MessageCreate, session: WritableSessionDep, caller: Writer, dispatcher: DispatcherDep,
                       key: IdempotencyKey = None, wait: bool = True) -> CommandPublic:
    """Continues the session. With `budget`, its caps are set first: how a session ended
    `budget` goes on (without one, or with one it has already spent, 409 `budget_exhausted`)."""
    dispatcher.admit(body)
    command = PostMessage(**_ids(session, caller), text=body.text, expected_seq=body.expected_seq, budget=body.budget)
    return await dispatcher.dispatch(command, wait, key)


@router.post("/wake", response_model=CommandPublic, responses=PENDING)
async def wake_session(session: WritableSessionDep, caller: Writer, dispatcher: DispatcherDep, response: Response,
                       key: IdempotencyKey = None, wait: bool = True) -> CommandPublic:
    return _status(response, await dispatcher.dispatch(WakeSession(**_ids(session, caller)), wait, key))


@router.post("/cancel", response_model=CommandPublic, responses=PENDING)
async def cancel_session(session: WritableSessionDep, caller: Writer, dispatcher: DispatcherDep,
                         response: Response, key: IdempotencyKey = None, wait: bool = True) -> CommandPublic:
    return _status(response, await dispatcher.dispatch(CancelSession(**_ids(session, caller)), wait, key))


@router.post("/approvals/{tool_call_id}", response_model=CommandPublic, responses=PENDING)
async def approve_tool_call(tool_call_id: ToolCallIdPath, session: WritableSessionDep, caller: Writer,
                            dispatcher: DispatcherDep, response: Response, key: IdempotencyKey = None,
                            wait: bool = True) -> CommandPublic:
    command = ApproveToolCall(**_ids(session, caller), tool_call_id=tool_call_id)
    return _status(response, await dispatcher.dispatch(command, wait, key))


@router.post("/denials/{tool_call_id}", response_model=CommandPublic, responses=PENDING)
async def deny_tool_call(tool_call_id: ToolCallIdPath, session: WritableSessionDep, caller: Writer,
                         dispatcher: DispatcherDep, response: Response, body: DenialCreate | None = None,
                         key: IdempotencyKey = None, wait: bool = True) -> CommandPublic:
    dispatcher.admit(body)
    command = DenyToolCall(**_ids(session, caller), tool_call_id=tool_call_id,
                           reason=body.reason if body else None)
    return _status(response, await dispatcher.dispatch(command, wait, key))


@router.post("/takeover", response_model=CommandPublic, responses=PENDING)
async def take_over(session: WritableSessionDep, caller: Writer, dispatcher: DispatcherDep, response: Response,
                    key: IdempotencyKey = None, wait: bool = True) -> CommandPublic:
    """The caller takes the hands: tool calls wait for it (`POST .../tool-results/{id}`, routes/tool_calls.py). The
    actor is human:<principal>, or service:<principal> for a service key (`Caller.hands`)."""
    command = TakeOver(**_ids(session, caller, hands=True))
    return _status(response, await dispatcher.dispatch(command, wait, key))


@router.post("/handback", response_model=CommandPublic, responses=PENDING)
async def hand_back(session: WritableSessionDep, caller: Writer, dispatcher: DispatcherDep, response: Response,
                    key: IdempotencyKey = None, wait: bool = True) -> CommandPublic:
    command = HandBack(**_ids(session, caller, hands=True))
    return _status(response, await dispatcher.dispatch(command, wait, key))
