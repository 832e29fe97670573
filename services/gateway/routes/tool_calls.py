"""Tool calls answered from outside the sandbox: a session's harness stream, the tenant's
worker pool, and the results route both post to (docs/your-own-tools.md).

A result is recorded once. The brain records the first for a pending call and refuses any
later one as `not_pending`; this route then reads what the log recorded for the call and
answers as a retry expects: 200 with the recorded outcome when it is the same answer, 409
`tool_call_already_answered` when it is another, 404 `unknown_tool_call` when the session
never made the call. A built-in call nobody took the hands for stays 409 `not_pending`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse

from wakeline.contract.commands import SubmitToolResult, ToolResultReport
from wakeline.contract.fitting import fit_report
from wakeline.contract.limits import input_budget
from wakeline.storage.event_store import Scope
from wakeline_gateway.bounds import ToolCallIdPath
from wakeline_gateway.deps import (
    DispatcherDep, FeedDep, IdempotencyKey, LeasesDep, PoolWorker, SettingsDep, StoreDep, WritableSessionDep,
    Writer,
)
from wakeline_gateway.errors import ApiError
from wakeline_gateway.harness import recorded_answer, session_frames
from wakeline_gateway.idempotency import new_command_id
from wakeline_gateway.pool import pool_frames
from wakeline_gateway.problem import responses
from wakeline_gateway.shapes.commands import CommandPublic, ToolResultCreate
from wakeline_gateway.read_model.sessions import SessionStore
from wakeline_gateway.sse import Tail

router = APIRouter(tags=["tool calls"], responses=responses(401, 403, 422, 500, 503))
SSE = {"content": {"text/event-stream": {}}}
SESSION_STREAM = ("`event: tool_call` frames (`id: <seq>`, data `{session_id, tool_call_id, name, input, seq}`): "
                  "first every declared tool's call still unanswered, then each new one as it commits; then "
                  "`event: session_ended` (data `{session_id, seq, reason}`) and the stream ends. `: heartbeat` "
                  "comments keep it open. A reconnect issues again whatever is still unanswered.")
POOL_STREAM = ("`event: tool_call` frames (data `{session_id, tool_call_id, name, input, seq, lease_expires_at}`): "
               "calls of the tenant's sessions waiting for their harness, each leased to one connected worker; "
               "a call goes back on offer when its worker disconnects or its lease runs out.")
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@router.get("/v1/sessions/{session_id}/tool-calls/stream", response_class=StreamingResponse,
            responses={200: {**SSE, "description": SESSION_STREAM}, **responses(404)})
async def stream_session_tool_calls(session: WritableSessionDep, caller: Writer, store: StoreDep,
                                    settings: SettingsDep, feed: FeedDep) -> StreamingResponse:
    """The session's own harness: its owner, or a service key of its tenant, answers these calls."""
    tail = Tail(store, caller.scope, session.session_id, settings.stream_poll_s, settings.stream_heartbeat_s,
                feed.listeners, feed.running, settings.stream_recheck_s)
    return StreamingResponse(session_frames(tail), media_type="text/event-stream", headers=HEADERS)


ToolNames = Annotated[str, Query(min_length=1, max_length=4200, pattern=r"^[A-Za-z0-9_-]{1,64}(,[A-Za-z0-9_-]{1,64})*$",
                                 description="The declared tools this worker runs, comma-separated.")]


@router.get("/v1/tool-calls/stream", response_class=StreamingResponse,
            responses={200: {**SSE, "description": POOL_STREAM}})
async def stream_pool_tool_calls(request: Request, caller: PoolWorker, leases: LeasesDep, settings: SettingsDep,
                                 tools: ToolNames,
                                 lease_s: Annotated[float | None, Query(gt=0, le=3600)] = None,
                                 max_in_flight: Annotated[int, Query(ge=1, le=1000)] = 16,
                                 until_empty: bool = False) -> StreamingResponse:
    """A pool worker (service key): calls of every session of its tenant that declares these
    tools, at most `max_in_flight` of them unanswered at once; with `until_empty`, the stream
    ends once nothing is on offer and every call it offered is answered."""
    names = sorted(set(tools.split(",")))
    frames = pool_frames(leases, caller.tenant, names, lease_s or settings.tool_call_lease_s,
                         settings.tool_call_poll_s, settings.stream_heartbeat_s, max_in_flight,
                         request.is_disconnected, until_empty)
    return StreamingResponse(frames, media_type="text/event-stream", headers=HEADERS)


@router.post("/v1/sessions/{session_id}/tool-results/{tool_call_id}", response_model=CommandPublic,
             responses={202: {"model": CommandPublic, "description": "Sent; no outcome recorded within the wait."},
                        **responses(404, 409, 413, 429)})
async def submit_tool_result(tool_call_id: ToolCallIdPath, body: ToolResultCreate, session: WritableSessionDep,
                             caller: Writer, dispatcher: DispatcherDep, store: StoreDep, leases: LeasesDep,
                             settings: SettingsDep, response: Response, key: IdempotencyKey = None,
                             wait: bool = True) -> CommandPublic:
    """Answers a pending tool call: a declared tool's, from the session's harness (the event's
    actor is the key's principal, `user:` or `service:`), or any call from whoever took the
    hands (`human:` or `service:`). Output over the record limit is cut to fit and marked, as
    the runner cuts its own. The same answer again is 200 with the recorded outcome."""
    body = _fitted(body, session.session_id, caller.tenant, tool_call_id, settings.max_record_bytes)
    command = SubmitToolResult(command_id=new_command_id(), session_id=session.session_id, tenant=caller.tenant,
                               actor=caller.hands, tool_call_id=tool_call_id, output=body.output,
                               is_error=body.is_error)
    try:
        answer = await dispatcher.dispatch(command, wait, key)
    except ApiError as err:
        if err.code != "not_pending":
            raise
        answer = await _answered_before(store, caller.scope, session.session_id, tool_call_id, body, err,
                                        settings.wait_timeout_s)
    if answer.status == "done" and caller.role == "service":
        # Only a service key can hold a pool lease: until the archive has the result, the pool
        # must not offer the call again. A user's own harness is spared the write.
        await leases.answered(caller.tenant, session.session_id, tool_call_id)
    response.status_code = 200 if answer.status == "done" else 202
    return answer


def _fitted(body: ToolResultCreate, session_id: str, tenant: str, tool_call_id: str,
            max_record_bytes: int) -> ToolResultCreate:
    report = ToolResultReport(session_id=session_id, tenant=tenant, tool_call_id=tool_call_id, name="-",
                              output=body.output, is_error=body.is_error, runner="gateway")
    fitted = fit_report(report, input_budget(max_record_bytes))
    return body if fitted is report else body.model_copy(update={"output": fitted.output})


async def _answered_before(store: SessionStore, scope: Scope, session_id: str, tool_call_id: str,
                           body: ToolResultCreate, refused: ApiError, wait_s: float) -> CommandPublic:
    """What a result the brain refused as `not_pending` met in the log (module docstring)."""
    seq = int(refused.extra.get("seq") or 0)
    call, result = await recorded_answer(store, scope, session_id, tool_call_id, seq, wait_s)
    if call is None:
        raise ApiError(404, f"session {session_id!r} has no tool call {tool_call_id!r}", code="unknown_tool_call",
                       session_id=session_id, tool_call_id=tool_call_id)
    if result is None:
        raise refused  # a built-in call nobody took the hands for, or one awaiting approval
    recorded = result.payload
    if (recorded.output, recorded.is_error) == (body.output, body.is_error):
        return CommandPublic(session_id=session_id, command_id=result.causation_id or "", status="done",
                             outcome=result.type, seq=result.seq,
                             note="this answer was already recorded; nothing new was recorded")
    raise ApiError(409, f"tool call {tool_call_id!r} was already answered (seq {result.seq}, by {result.actor}) "
                        "with a different result; the first answer stands", code="tool_call_already_answered",
                   session_id=session_id, tool_call_id=tool_call_id, seq=result.seq, answered_by=result.actor)
