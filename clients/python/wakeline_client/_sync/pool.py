# GENERATED from wakeline_client/_async/pool.py by clients/python/codegen/unasync.py: do not edit.
"""`client.pool.worker(tools).run()`: the tenant's pool of declared-tool calls (a service key).

`GET /v1/tool-calls/stream?tools=a,b` offers each call of those tools, in any session of the
tenant, to one connected worker at a time under a lease; a call goes back on offer when its
worker disconnects or the lease runs out. A worker runs each call and posts the result with
the session's route, reconnecting after any drop until `stop()` (or, async, cancellation).
"""

from __future__ import annotations

from wakeline_client import operations as ops
from wakeline_client._sync.answers import Answerer
from wakeline_client._sync.frames import frames_forever
from wakeline_client._sync.http import Http
from wakeline_client._sync.sessions import Sessions
from wakeline_client._sync.streams import ToolsLike
from wakeline_client.tool_calls import ToolCall, tool_call_event
from wakeline_client.tools import as_tools


class PoolWorker:
    def __init__(self, http: Http, sessions: Sessions, tools: ToolsLike, lease_s: float | None = None,
                 max_in_flight: int = 1):
        self._http, self.tools, self.lease_s, self.max_in_flight = http, as_tools(tools), lease_s, max_in_flight
        self.answers = Answerer(sessions, self.tools, http.retry)
        self._stopped = False

    def stop(self) -> None:
        """Ends `run` at the next frame (a heartbeat at the latest)."""
        self._stopped = True

    def run(self) -> None:
        query = {"tools": ",".join(self.tools.names), "lease_s": self.lease_s, "max_in_flight": self.max_in_flight}
        for frame in frames_forever(self._http, ops.POOL_TOOL_CALLS, query=query,
                                          stopping=lambda: self._stopped):
            event = tool_call_event(frame)
            if isinstance(event, ToolCall):
                self.answers.answer(event)


class Pool:
    def __init__(self, http: Http, sessions: Sessions):
        self._http, self._sessions = http, sessions

    def worker(self, tools: ToolsLike, *, lease_s: float | None = None, max_in_flight: int = 1) -> PoolWorker:
        """`lease_s`: how long a call is this worker's before it goes back on offer (the gateway's
        default when None); a tool that may run longer should ask for more. `max_in_flight`: calls
        leased to it at once; a worker runs one at a time, so more would only hold calls that
        another worker could run."""
        return PoolWorker(self._http, self._sessions, tools, lease_s, max_in_flight)
