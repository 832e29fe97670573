"""The model interface the brain calls: one request model in, one reply model out.

Adapters (the brain's `wakeline_brain.scripted` and `wakeline_brain.claude`) turn it into
their backend's calls; the brain never sees a backend's types.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Protocol

from pydantic import BaseModel, ConfigDict

from wakeline.contract.events import Usage


class ModelRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    model: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    max_tokens: int
    thinking_budget: int | None = None  # extended thinking's budget (Claude); None is off
    # Where the request stands in the log: lets a deterministic model derive stable ids.
    session_id: str
    seq: int


class ToolUse(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    input: dict[str, Any]


class ModelReply(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str = ""
    reasoning: list[str] = []
    tool_uses: list[ToolUse] = []
    usage: Usage = Usage()
    stop_reason: str = "end_turn"
    # The reply's content blocks as the API returned them, for models whose blocks must
    # go back unchanged (Claude's thinking); empty for the scripted model.
    blocks: list[dict[str, Any]] = []


class ModelError(RuntimeError):
    """The model could not answer (after the adapter's own retries). `retryable`: the
    cause passes (overload, rate limit, a cut connection), so the session waits for the
    model instead of ending."""

    def __init__(self, message: str, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


# Live text of a reply being written, for viewers: (kind, text) with kind "text" or
# "thinking". Never recorded; the finished reply is.
DeltaSink = Callable[[str, str], Awaitable[None]]


class Model(Protocol):
    """`streams` (optional, False when absent): `complete` calls `on_delta` as the reply is
    written, so the actor publishes deltas for live viewers."""

    name: str

    async def complete(self, request: ModelRequest, on_delta: DeltaSink | None = None) -> ModelReply: ...
