"""`client.harness.run(session_id, tools)`: a session's declared tools, served until it ends.

Each call is run by the tools (`@tool` functions; their exceptions become `is_error` results)
and its result posted; the stream reconnects after any drop, with backoff, for as long as
the session lives, and `run` returns the session's end (`ToolCallsEnded`).
"""

from __future__ import annotations

from wakeline_client._async.sessions import AsyncSessions
from wakeline_client._async.streams import ToolsLike
from wakeline_client.tool_calls import ToolCall, ToolCallsEnded


class AsyncHarness:
    def __init__(self, sessions: AsyncSessions):
        self._sessions = sessions

    async def run(self, session_id: str, tools: ToolsLike, *, send_wake: bool = True) -> ToolCallsEnded | None:
        async with self._sessions.wake(session_id, tools, send_wake=send_wake) as stream:
            async for event in stream:
                if isinstance(event, ToolCall):
                    await stream.answer(event)
            return stream.ended
