"""The offline scripted model: deterministic, driven by a policy file, and labelled.

It is not a stand-in for Claude: its name is `scripted:<policy>`, so every event it causes
carries the actor `agent:scripted:<policy>`. The reply depends only on the request: the
step is the number of assistant replies since the last user text, and tool-use ids are
derived from the session and seq, so a replayed request gets the same reply.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from wakeline.contract.events import Usage
from wakeline.agent.model import DeltaSink, ModelError, ModelReply, ModelRequest, ToolUse


class PolicyToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    input: dict[str, Any]


class PolicyStep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = ""
    tool_calls: list[PolicyToolCall] = []
    delay_s: float = Field(default=0.0, ge=0, le=60)


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    steps: list[PolicyStep]
    final: str = "Done."


# The policies shipped with the package (package data): `scripted:demo` is `policies/demo.json`.
PACKAGED_POLICIES: Traversable = files("wakeline_brain") / "policies"


def load_policy(directory: Traversable, name: str) -> Policy:
    path = directory / f"{name}.json"
    if not path.is_file():
        raise ModelError(f"no scripted policy {name!r} in {directory}")
    return Policy.model_validate_json(path.read_text())


class ScriptedModel:
    def __init__(self, policy: Policy):
        self.policy = policy
        self.name = f"scripted:{policy.name}"

    async def complete(self, request: ModelRequest, on_delta: DeltaSink | None = None) -> ModelReply:
        index = _replies_since_user_text(request.messages)
        if index >= len(self.policy.steps):
            return _reply(request, PolicyStep(text=_fill(self.policy.final, request.messages)))
        step = self.policy.steps[index]
        if step.delay_s:
            await asyncio.sleep(step.delay_s)  # a slow model, for demos and crash tests
        return _reply(request, step.model_copy(update={"text": _fill(step.text, request.messages)}))


def _reply(request: ModelRequest, step: PolicyStep) -> ModelReply:
    uses = [ToolUse(id=_tool_id(request, i), name=call.name, input=call.input)
            for i, call in enumerate(step.tool_calls)]
    usage = Usage(input_tokens=len(json.dumps(request.messages)) // 4, output_tokens=len(step.text) // 4 + 1)
    return ModelReply(text=step.text, tool_uses=uses, usage=usage,
                      stop_reason="tool_use" if uses else "end_turn")


def _tool_id(request: ModelRequest, index: int) -> str:
    digest = hashlib.sha256(f"{request.session_id}:{request.seq}:{index}".encode()).hexdigest()
    return f"toolu_{digest[:24]}"


def _replies_since_user_text(messages: list[dict[str, Any]]) -> int:
    count = 0
    for message in reversed(messages):
        if message["role"] == "assistant":
            count += 1
        elif any(block.get("type") == "text" for block in message["content"]):
            break
    return count


def _fill(template: str, messages: list[dict[str, Any]]) -> str:
    """`{last_tool_output}` becomes the newest tool result, so the report shows what happened."""
    if "{last_tool_output}" not in template:
        return template
    return template.replace("{last_tool_output}", _last_tool_output(messages))


def _last_tool_output(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        for block in reversed(message["content"]):
            if block.get("type") == "tool_result":
                return str(block.get("content", ""))[:2000]
    return "(no tool output)"
