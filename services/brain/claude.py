"""The Claude adapter: the brain's `ModelRequest` through the official `anthropic` SDK.

The SDK does the retrying (429, 529, 5xx, with backoff); what still fails becomes a
`ModelError` and the session ends with reason `error`. `base_url` is configurable so
tests drive the real SDK against a local server speaking the Messages API.
"""

from __future__ import annotations

import anthropic

from wakeline.events import Usage
from wakeline_brain.model import ModelError, ModelReply, ModelRequest, ToolUse


class ClaudeModel:
    def __init__(self, model: str, api_key: str, base_url: str | None = None, max_retries: int = 4,
                 timeout_s: float = 120.0):
        self.name = model
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=max_retries,
                                                timeout=timeout_s)

    async def complete(self, request: ModelRequest) -> ModelReply:
        try:
            response = await self._client.messages.create(
                model=self.name, system=request.system, messages=request.messages,
                tools=request.tools, max_tokens=request.max_tokens,
            )
        except anthropic.APIError as err:
            raise ModelError(f"{type(err).__name__}: {err}") from err
        return _reply(response)

    async def close(self) -> None:
        await self._client.close()


def _reply(response) -> ModelReply:
    texts, reasoning, uses = [], [], []
    for block in response.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "thinking":
            reasoning.append(block.thinking)
        elif block.type == "tool_use":
            uses.append(ToolUse(id=block.id, name=block.name, input=dict(block.input)))
    usage = Usage(input_tokens=response.usage.input_tokens, output_tokens=response.usage.output_tokens)
    return ModelReply(text="\n".join(texts), reasoning=reasoning, tool_uses=uses, usage=usage,
                      stop_reason=response.stop_reason or "end_turn")
