"""Commands to an existing session: messages, wake, cancel, approvals and denials.

Each sends one command to `wakeline.inbox` and waits (bounded) for the event it causes.
A message answers 202 even when recorded: the turn it starts runs on.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response

from wakeline.commands import (
    ApproveToolCall, CancelSession, DenyToolCall, HandBack, PostMessage, SubmitToolResult, TakeOver, WakeSession,
)
from wakeline_gateway.auth import Caller
from wakeline_gateway.deps import CommandId, DispatcherDep, WritableSessionDep, Writer
from wakeline_gateway.shapes import CommandPublic, DenialCreate, MessageCreate, SessionPublic, ToolResultCreate

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["commands"])
ToolCallId = Annotated[str, Path(min_length=1, max_length=200)]
CONFLICT = {409: {"description": "The brain refused the command (e.g. expected_seq is stale)."}}


def _ids(session: SessionPublic, caller: Caller, command_id: str, *, human: bool = False) -> dict[str, Any]:
    """Tenant and actor come from the key, never from the request."""
    return {"command_id": command_id, "session_id": session.session_id, "tenant": caller.tenant,
            "actor": caller.human if human else caller.actor}


def _status(response: Response, answer: CommandPublic) -> CommandPublic:
    response.status_code = 200 if answer.status == "done" else 202
    return answer


@router.post("/messages", status_code=202, response_model=CommandPublic, responses=CONFLICT)
async def post_message(body: MessageCreate, session: WritableSessionDep, caller: Writer, command_id: CommandId,
                       dispatcher: DispatcherDep, wait: bool = True) -> CommandPublic:
    command = PostMessage(**_ids(session, caller, command_id), text=body.text, expected_seq=body.expected_seq)
    return await dispatcher.dispatch(command, wait)


@router.post("/wake", response_model=CommandPublic, responses={202: {"model": CommandPublic}})
async def wake_session(session: WritableSessionDep, caller: Writer, command_id: CommandId, dispatcher: DispatcherDep,
                       response: Response, wait: bool = True) -> CommandPublic:
    return _status(response, await dispatcher.dispatch(WakeSession(**_ids(session, caller, command_id)), wait))


@router.post("/cancel", response_model=CommandPublic, responses=CONFLICT)
async def cancel_session(session: WritableSessionDep, caller: Writer, command_id: CommandId, dispatcher: DispatcherDep,
                         response: Response, wait: bool = True) -> CommandPublic:
    return _status(response, await dispatcher.dispatch(CancelSession(**_ids(session, caller, command_id)), wait))


@router.post("/approvals/{tool_call_id}", response_model=CommandPublic, responses=CONFLICT)
async def approve_tool_call(tool_call_id: ToolCallId, session: WritableSessionDep, caller: Writer,
                            command_id: CommandId, dispatcher: DispatcherDep, response: Response,
                            wait: bool = True) -> CommandPublic:
    command = ApproveToolCall(**_ids(session, caller, command_id), tool_call_id=tool_call_id)
    return _status(response, await dispatcher.dispatch(command, wait))


@router.post("/denials/{tool_call_id}", response_model=CommandPublic, responses=CONFLICT)
async def deny_tool_call(tool_call_id: ToolCallId, session: WritableSessionDep, caller: Writer, command_id: CommandId,
                         dispatcher: DispatcherDep, response: Response, body: DenialCreate | None = None,
                         wait: bool = True) -> CommandPublic:
    command = DenyToolCall(**_ids(session, caller, command_id), tool_call_id=tool_call_id,
                           reason=body.reason if body else None)
    return _status(response, await dispatcher.dispatch(command, wait))


@router.post("/takeover", response_model=CommandPublic, responses=CONFLICT)
async def take_over(session: WritableSessionDep, caller: Writer, command_id: CommandId, dispatcher: DispatcherDep,
                    response: Response, wait: bool = True) -> CommandPublic:
    """A person takes the hands: tool calls wait for them (`POST .../tool-results/{id}`)."""
    return _status(response, await dispatcher.dispatch(TakeOver(**_ids(session, caller, command_id, human=True)),
                                                       wait))


@router.post("/handback", response_model=CommandPublic, responses=CONFLICT)
async def hand_back(session: WritableSessionDep, caller: Writer, command_id: CommandId, dispatcher: DispatcherDep,
                    response: Response, wait: bool = True) -> CommandPublic:
    return _status(response, await dispatcher.dispatch(HandBack(**_ids(session, caller, command_id, human=True)),
                                                       wait))


@router.post("/tool-results/{tool_call_id}", response_model=CommandPublic, responses=CONFLICT)
async def submit_tool_result(tool_call_id: ToolCallId, body: ToolResultCreate, session: WritableSessionDep,
                             caller: Writer, command_id: CommandId, dispatcher: DispatcherDep,
                             response: Response, wait: bool = True) -> CommandPublic:
    """The person holding the hands answers a pending tool call; the event's actor is human:<principal>."""
    command = SubmitToolResult(**_ids(session, caller, command_id, human=True), tool_call_id=tool_call_id,
                               output=body.output, is_error=body.is_error)
    return _status(response, await dispatcher.dispatch(command, wait))
