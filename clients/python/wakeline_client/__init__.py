"""The Python client of the Wakeline gateway.

`Wakeline` (sync) and `AsyncWakeline` (async) cover every route; `@tool` makes a declared
tool of a typed function, and `client.harness.run(session_id, tools)` serves a session's
declared tools until it ends. Failures raise `WakelineError` subclasses (`errors.py`).
"""

from wakeline_client import models
from wakeline_client._async.client import AsyncWakeline
from wakeline_client._async.streams import AsyncToolCallStream
from wakeline_client._sync.client import Wakeline
from wakeline_client._sync.streams import ToolCallStream
from wakeline_client.errors import (
    BudgetExhausted, Conflict, ConnectionFailed, Forbidden, IdempotencyKeyReused, InvalidRequest, NotFound, NotPending,
    QuotaExceeded, ServerError, ToolCallAlreadyAnswered, TooLarge, Unauthorized, Unavailable, UnknownToolCall,
    WakelineError,
)
from wakeline_client.live import Delta
from wakeline_client.retry import RetryPolicy
from wakeline_client.sse import Frame
from wakeline_client.tool_calls import ToolCall, ToolCallsEnded, ToolResult
from wakeline_client.tools import Tool, Tools, tool

__all__ = [
    "AsyncToolCallStream", "AsyncWakeline", "BudgetExhausted", "Conflict", "ConnectionFailed", "Delta", "Forbidden",
    "Frame", "IdempotencyKeyReused", "InvalidRequest", "NotFound", "NotPending", "QuotaExceeded", "RetryPolicy",
    "ServerError", "Tool", "ToolCall", "ToolCallAlreadyAnswered", "ToolCallStream", "ToolCallsEnded", "ToolResult",
    "Tools", "TooLarge", "Unauthorized", "Unavailable", "UnknownToolCall", "Wakeline", "WakelineError", "models",
    "tool",
]
