"""Runs a declared tool's call and posts its result until the gateway has it.

A call can be issued again (each reconnect re-issues what is unanswered): the result made
the first time is kept and posted again, so a tool runs once per call in this process
however often the call arrives. A transient failure to post is retried with backoff; an
answer recorded by someone else, or a call the session no longer waits for, is logged and
left (`ToolCallAlreadyAnswered`, `UnknownToolCall`, `NotPending`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

from wakeline_client import models as m
from wakeline_client._async.commands import AsyncSessionCommands
from wakeline_client._async.frames import TRANSIENT
from wakeline_client.errors import NotPending, ToolCallAlreadyAnswered, UnknownToolCall
from wakeline_client.retry import RetryPolicy
from wakeline_client.tool_calls import ToolCall, ToolResult
from wakeline_client.tools import Tools

log = logging.getLogger("wakeline_client")
REMEMBERED = 1000  # results kept for re-issued calls
SETTLED = (ToolCallAlreadyAnswered, UnknownToolCall, NotPending)


class AsyncAnswerer:
    def __init__(self, commands: AsyncSessionCommands, tools: Tools, retry: RetryPolicy):
        self.commands, self.tools, self.retry = commands, tools, retry
        self.results: OrderedDict[tuple[str, str], ToolResult] = OrderedDict()

    async def run(self, call: ToolCall) -> ToolResult:
        """The call's result, made once: a re-issued call gets the first result again."""
        key = (call.session_id, call.tool_call_id)
        if key not in self.results:
            self.results[key] = await self.tools.ainvoke(call)
            while len(self.results) > REMEMBERED:
                self.results.popitem(last=False)
        return self.results[key]

    async def answer(self, call: ToolCall) -> m.CommandPublic | None:
        """Runs the call and posts its result; None when the gateway settled it otherwise."""
        return await self.post(call, await self.run(call))

    async def post(self, call: ToolCall, result: ToolResult) -> m.CommandPublic | None:
        attempt = 0
        while True:
            try:
                return await self.commands.submit_tool_result(call.session_id, call.tool_call_id, result)
            except SETTLED as err:
                log.warning("tool call %s of %s not recorded: %s", call.tool_call_id, call.session_id, err)
                return None
            except TRANSIENT as err:
                log.warning("posting tool call %s failed (%s); retrying", call.tool_call_id, err)
            await asyncio.sleep(self.retry.delay(attempt))
            attempt += 1
