"""The harness's side of a declared tool: the calls it is sent and the results it posts.

`GET /v1/sessions/{id}/tool-calls/stream` sends `event: tool_call` frames (`ToolCall`) and,
once the session is over, one `event: session_ended` (`ToolCallsEnded`); the tenant's pool
(`GET /v1/tool-calls/stream`) sends tool calls only, each under a lease. A call may arrive
more than once (every reconnect re-issues what is still unanswered): posting the same
result again is answered 200 with the result already recorded.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from wakeline_client.sse import Frame


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    type: Literal["tool_call"] = "tool_call"
    session_id: str
    tool_call_id: str
    name: str
    input: dict[str, Any]
    seq: int
    lease_expires_at: datetime | None = None  # the pool's only

    @property
    def id(self) -> str:
        return self.tool_call_id


class ToolCallsEnded(BaseModel):
    """The session is over: no more calls will come, and the server closes the stream."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: Literal["session_ended"] = "session_ended"
    session_id: str
    seq: int
    reason: str | None = None


class ToolResult(BaseModel):
    """What a tool answered: the body of `POST .../tool-results/{tool_call_id}`."""

    model_config = ConfigDict(frozen=True)

    output: str
    is_error: bool = False


ToolCallEvent = ToolCall | ToolCallsEnded


def tool_call_event(frame: Frame) -> ToolCallEvent | None:
    """The event a frame of a tool-call stream carries; None for any other kind of frame."""
    if frame.event == "tool_call":
        return ToolCall.model_validate(frame.json())
    if frame.event in ("session_ended", "session_end"):
        return ToolCallsEnded.model_validate({"type": "session_ended", **frame.json()})
    return None


def as_result(result: ToolResult | str, is_error: bool = False) -> ToolResult:
    return result if isinstance(result, ToolResult) else ToolResult(output=result, is_error=is_error)
