# GENERATED from wakeline_client/_async/streams.py by clients/python/codegen/unasync.py: do not edit.
"""The session's streams (`client.sessions.*`): its live events, and the calls of its declared tools.

`stream_frames` follows `GET /v1/sessions/{id}/stream` and, after a drop, comes back with
`Last-Event-ID` set to the last event it handed out, so nothing is skipped or repeated.
`wake` sends the wake command and serves the session's declared tools:

    with client.sessions.wake(session_id, tools=TOOLS) as stream:
        for event in stream:
            if event.type == "tool_call":
                stream.submit_tool_result(event.id, stream.run(event))
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Callable, Iterable
from typing import Any

from wakeline_client import models as m
from wakeline_client import operations as ops
from wakeline_client._sync.answers import Answerer
from wakeline_client._sync.commands import SessionCommands
from wakeline_client._sync.frames import TRANSIENT, frames_forever, read_frames
from wakeline_client._sync.http import Http
from wakeline_client.errors import NotFound
from wakeline_client.live import ENDINGS, live_item
from wakeline_client.sse import Frame
from wakeline_client.tool_calls import ToolCall, ToolCallEvent, ToolCallsEnded, ToolResult, tool_call_event
from wakeline_client.tools import Tool, Tools, as_tools

ToolsLike = Tools | Iterable[Tool | Callable[..., Any]] | None


class SessionStreams(SessionCommands):

    def stream_frames(self, session_id: str, *, after: int = 0, until_end: bool = True,
                            deltas: bool = False, appear_within_s: float = 0.0) -> Iterator[Frame]:
        """Every frame after seq `after` until the session ends (`until_end`) or is deleted.
        A session created a moment ago may answer 404 for up to `appear_within_s`."""
        deadline, attempt = time.monotonic() + appear_within_s, 0
        query = {"until_end": until_end, "deltas": deltas}
        while True:
            try:
                with self._http.stream(ops.STREAM_EVENTS, {"session_id": session_id}, query,
                                             {"Last-Event-ID": str(after)}) as response:
                    for frame in read_frames(response):
                        if frame.is_comment:
                            continue
                        attempt, after = 0, int(frame.id) if frame.id is not None else after
                        yield frame
                        if frame.event == "deleted" or (until_end and frame.event in ENDINGS):
                            return
            except NotFound:
                if time.monotonic() > deadline:
                    raise
            except TRANSIENT:
                pass  # dropped: back from the last event handed out
            time.sleep(self._http.retry.delay(attempt))
            attempt += 1

    def stream(self, session_id: str, *, after: int = 0, until_end: bool = True, deltas: bool = False,
                     appear_within_s: float = 0.0) -> Iterator[Any]:
        """As `stream_frames`, typed: each a `models.Event` (or a `live.Delta` with `deltas`)."""
        for frame in self.stream_frames(session_id, after=after, until_end=until_end, deltas=deltas,
                                              appear_within_s=appear_within_s):
            yield live_item(frame)

    def wake(self, session_id: str, tools: ToolsLike = None, *, send_wake: bool = True) -> ToolCallStream:
        """A context manager: sends the wake command (unless told not to) and yields the stream of
        the session's declared-tool calls."""
        return ToolCallStream(self._http, self, session_id, as_tools(tools), send_wake)

    def tool_calls(self, session_id: str, tools: ToolsLike = None) -> ToolCallStream:
        """The stream of the session's declared-tool calls, without a wake command."""
        return self.wake(session_id, tools, send_wake=False)


class ToolCallStream:
    """Each unanswered call of the session's declared tools, then each new one, until the
    session ends (`ToolCallsEnded`, kept in `.ended`); reconnects by itself after a drop."""

    def __init__(self, http: Http, commands: SessionCommands, session_id: str, tools: Tools,
                 send_wake: bool):
        self._http, self._commands, self.session_id, self.tools = http, commands, session_id, tools
        self.send_wake = send_wake
        self.woke: m.CommandPublic | None = None  # the wake command's answer
        self.ended: ToolCallsEnded | None = None
        self.answers = Answerer(commands, tools, http.retry)
        self._closed = False

    def __enter__(self) -> ToolCallStream:
        if self.send_wake:
            self.woke = self._commands.send_wake(self.session_id)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._closed = True

    def __iter__(self) -> Iterator[ToolCallEvent]:
        for frame in frames_forever(self._http, ops.SESSION_TOOL_CALLS, {"session_id": self.session_id},
                                          stopping=lambda: self._closed):
            event = tool_call_event(frame)
            if event is not None:
                yield event
            if isinstance(event, ToolCallsEnded):
                self.ended = event
                return

    def run(self, call: ToolCall) -> ToolResult:
        """The call run by this stream's tools (once per call: a re-issue gets the same result)."""
        return self.answers.run(call)

    def submit_tool_result(self, tool_call_id: str, result: ToolResult | str, *,
                                 is_error: bool = False) -> m.CommandPublic:
        return self._commands.submit_tool_result(self.session_id, tool_call_id, result, is_error=is_error)

    def answer(self, call: ToolCall) -> m.CommandPublic | None:
        """Runs the call and posts its result, retrying the post until the gateway has it."""
        return self.answers.answer(call)

