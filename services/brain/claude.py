"""The Claude adapter: the brain's `ModelRequest` through the official `anthropic` SDK.

- **Streaming.** Every call streams (`messages.stream`); text and thinking deltas go to
  `on_delta` as they arrive (live viewers), the finished message is the reply. A stream
  cut part-way raises like any failed call: nothing partial is returned, the turn is redone.
- **Blocks as returned.** The reply carries every content block exactly as the API sent
  it (thinking with its signature, redacted_thinking, text, tool_use), so the brain
  records them and the next request sends them back unchanged, as extended thinking needs.
- **Prompt caching.** Up to four `cache_control` breakpoints (the API's limit): the tools,
  the system prompt, the end of the previous request's conversation and the end of this
  one (`cache_breakpoints`). Every breakpoint but the last sits where one sat in the
  previous request, so its prefix is what that request wrote to the cache.
- **Retries** are the SDK's (429, 529, 5xx, cut connections; `retry-after` honoured).
  What still fails becomes a `ModelError`, `retryable` when waiting may help.

`base_url` is configurable so tests drive the real SDK against a local server speaking
the Messages API.
"""

from __future__ import annotations

import copy
from typing import Any

import anthropic
import httpx2  # the SDK's HTTP client: a stream cut part-way raises its errors, not the SDK's

from wakeline.contract.events import Usage
from wakeline.agent.model import DeltaSink, ModelError, ModelReply, ModelRequest, ToolUse

EPHEMERAL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4  # the Messages API refuses a request with more
# Blocks a breakpoint may not sit on (the API refuses cache_control on thinking).
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


class ClaudeModel:
    streams = True  # its text reaches live viewers as it is written (the actor's deltas)

    def __init__(self, model: str, api_key: str, base_url: str | None = None, max_retries: int = 4,
                 timeout_s: float = 120.0, prompt_cache: bool = True):
        self.name = model
        self.prompt_cache = prompt_cache
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=max_retries,
                                                timeout=timeout_s)

    async def complete(self, request: ModelRequest, on_delta: DeltaSink | None = None) -> ModelReply:
        try:
            async with self._client.messages.stream(**self.params(request)) as stream:
                async for event in stream:
                    if on_delta is None:
                        continue
                    if event.type == "text":
                        await on_delta("text", event.text)
                    elif event.type == "thinking":
                        await on_delta("thinking", event.thinking)
                response = await stream.get_final_message()
        except anthropic.APIError as err:
            raise _model_error(err) from err
        except httpx2.TransportError as err:
            # The SDK retries a failed request, never a stream cut after it began.
            raise ModelError(f"the stream was cut: {type(err).__name__}: {err}", retryable=True) from err
        return _reply(response)

    async def count_tokens(self, request: ModelRequest) -> int:
        """The API's count of the request's input tokens (`messages/count_tokens`)."""
        params = self.params(request)
        params.pop("max_tokens")
        try:
            counted = await self._client.messages.count_tokens(**params)
        except anthropic.APIError as err:
            raise _model_error(err) from err
        return int(counted.input_tokens)

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The request's keyword arguments for the SDK, breakpoints and thinking included."""
        system: Any = request.system
        tools, messages = request.tools, request.messages
        if self.prompt_cache:
            system, tools, messages = cache_breakpoints(request.system, request.tools, request.messages)
        params: dict[str, Any] = {"model": self.name, "system": system, "messages": messages,
                                  "max_tokens": request.max_tokens}
        if tools:
            params["tools"] = tools
        if request.thinking_budget:
            params["thinking"] = {"type": "enabled", "budget_tokens": request.thinking_budget}
        return params

    async def close(self) -> None:
        await self._client.close()


def cache_breakpoints(system: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]]
                      ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Copies of system, tools and messages with at most `MAX_BREAKPOINTS` breakpoints:
    the last tool, the system prompt, the last message, and the last user message before
    the newest assistant message (where the previous request of a tool loop ended, so that
    request's breakpoint is met again). The inputs are not changed."""
    marked_system = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    marked_tools = [dict(t) for t in tools]
    if marked_tools:
        marked_tools[-1]["cache_control"] = EPHEMERAL
    marked = [dict(m) for m in messages]
    budget = MAX_BREAKPOINTS - 1 - (1 if marked_tools else 0)
    for index in _message_breakpoints(marked)[:budget]:
        marked[index] = _with_breakpoint(marked[index])
    return marked_system, marked_tools, marked


def _message_breakpoints(messages: list[dict[str, Any]]) -> list[int]:
    """The last message, then the previous request's last: the user message before the
    newest assistant message."""
    if not messages:
        return []
    points = [len(messages) - 1]
    last_assistant = next((i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "assistant"), None)
    if last_assistant is not None and last_assistant > 0 and last_assistant - 1 not in points:
        points.append(last_assistant - 1)
    return points


def _with_breakpoint(message: dict[str, Any]) -> dict[str, Any]:
    content = message["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else copy.deepcopy(content)
    for block in reversed(blocks):
        if block.get("type") not in _UNMARKABLE:
            block["cache_control"] = EPHEMERAL
            break
    return {**message, "content": blocks}


def _model_error(err: anthropic.APIError) -> ModelError:
    # Waiting helps with overload, rate limits, server errors and a lost connection; not
    # with a request the API refuses as such (400, 401, 403, 404, 413).
    retryable = isinstance(err, (anthropic.APIConnectionError, anthropic.RateLimitError,
                                 anthropic.InternalServerError)) or (
        isinstance(err, anthropic.APIStatusError) and (err.status_code >= 500 or err.status_code in (408, 409, 429)))
    return ModelError(f"{type(err).__name__}: {err}", retryable=retryable)


def _reply(response: Any) -> ModelReply:
    texts, reasoning, uses, blocks = [], [], [], []
    for block in response.content:
        blocks.append(block.model_dump(mode="json", exclude_none=True))
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "thinking":
            reasoning.append(block.thinking)
        elif block.type == "redacted_thinking":
            reasoning.append("[redacted thinking]")
        elif block.type == "tool_use":
            uses.append(ToolUse(id=block.id, name=block.name, input=dict(block.input)))
    u = response.usage
    usage = Usage(input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                  cache_creation_input_tokens=u.cache_creation_input_tokens or 0,
                  cache_read_input_tokens=u.cache_read_input_tokens or 0)
    return ModelReply(text="\n".join(texts), reasoning=reasoning, tool_uses=uses, usage=usage,
                      stop_reason=response.stop_reason or "end_turn", blocks=blocks)
