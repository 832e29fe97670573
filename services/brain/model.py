"""The model interface the brain calls: one request model in, one reply model out.

Adapters (`scripted.py`, `claude.py`) turn it into their backend's calls; the brain never
sees a backend's types.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from wakeline.events import Usage


class ModelRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    model: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    max_tokens: int
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


class ModelError(RuntimeError):
    """The model could not answer (after the adapter's own retries)."""


class Model(Protocol):
    name: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...
