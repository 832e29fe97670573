"""Commands to an existing session: messages, wake, cancel, approvals and denials.

Each sends one command to `wakeline.inbox` and waits (bounded) for the event it causes.
A message answers 202 even when recorded: the turn it starts runs on.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response

from wakeline.commands import ApproveToolCall, CancelSession, DenyToolCall, PostMessage, WakeSession
from wakeline_gateway.deps import Caller, CallerIdentity, CommandId, DispatcherDep, OwnedSessionDep, SessionDep
from wakeline_gateway.shapes import CommandPublic, DenialCreate, MessageCreate, SessionPublic

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["commands"])
ToolCallId = Annotated[str, Path(min_length=1, max_length=200)]
CONFLICT = {409: {"description": "The brain refused the command (e.g. expected_seq is stale)."}}


def _ids(session: SessionPublic, caller: CallerIdentity, command_id: str) -> dict[str, Any]:
    return {"command_id": command_id, "session_id": session.session_id, "tenant": caller.tenant,
            "actor": caller.actor}


def _status(response: Response, answer: CommandPublic) -> CommandPublic:
    response.status_code = 200 if answer.status == "done" else 202
    return answer


@router.post("/messages", status_code=202, response_model=CommandPublic, responses=CONFLICT)
async def post_message(body: MessageCreate, session: OwnedSessionDep, caller: Caller, command_id: CommandId,
                       dispatcher: DispatcherDep, wait: bool = True) -> CommandPublic:
    command = PostMessage(**_ids(session, caller, command_id), text=body.text, expected_seq=body.expected_seq)
    return await dispatcher.dispatch(command, wait)


@router.post("/wake", response_model=CommandPublic, responses={202: {"model": CommandPublic}})
async def wake_session(session: SessionDep, caller: Caller, command_id: CommandId, dispatcher: DispatcherDep,
                       response: Response, wait: bool = True) -> CommandPublic:
    return _status(response, await dispatcher.dispatch(WakeSession(**_ids(session, caller, command_id)), wait))


@router.post("/cancel", response_model=CommandPublic, responses=CONFLICT)
async def cancel_session(session: SessionDep, caller: Caller, command_id: CommandId, dispatcher: DispatcherDep,
                         response: Response, wait: bool = True) -> CommandPublic:
    return _status(response, await dispatcher.dispatch(CancelSession(**_ids(session, caller, command_id)), wait))


@router.post("/approvals/{tool_call_id}", response_model=CommandPublic, responses=CONFLICT)
async def approve_tool_call(tool_call_id: ToolCallId, session: SessionDep, caller: Caller,
                            command_id: CommandId, dispatcher: DispatcherDep, response: Response,
                            wait: bool = True) -> CommandPublic:
    command = ApproveToolCall(**_ids(session, caller, command_id), tool_call_id=tool_call_id)
    return _status(response, await dispatcher.dispatch(command, wait))


@router.post("/denials/{tool_call_id}", response_model=CommandPublic, responses=CONFLICT)
async def deny_tool_call(tool_call_id: ToolCallId, session: SessionDep, caller: Caller, command_id: CommandId,
                         dispatcher: DispatcherDep, response: Response, body: DenialCreate | None = None,
                         wait: bool = True) -> CommandPublic:
    command = DenyToolCall(**_ids(session, caller, command_id), tool_call_id=tool_call_id,
                           reason=body.reason if body else None)
    return _status(response, await dispatcher.dispatch(command, wait))
