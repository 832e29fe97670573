"""The Claude adapter through the real `anthropic` SDK against a local fake of the Messages API.

Nothing here reaches the external model: `ClaudeModel` gets `base_url` pointing at
`tests.fakes.messages_api.FakeMessagesAPI` on 127.0.0.1, which answers from a per-test queue
of canned responses shaped like the real API and records every request it received.

Retries are the SDK's own. anthropic 2.10.0 only honours a `retry-after` greater than 0 (a "0"
falls back to its 0.5 s * 2**n backoff), so the scripted errors say `retry-after: 0.01`. The SDK
also sends `api_key=` as `Authorization: Bearer <key>`, not `x-api-key`; the fake accepts either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import anthropic
import httpx
import pytest

from tests.fakes.messages_api import (
    FAST_RETRY_AFTER as FAST,
    FakeMessagesAPI,
    credential,
    error,
    message,
    text_block,
    text_message,
    thinking_block,
    tool_use_message,
)
from wakeline.events import Usage
from wakeline_brain.claude import ClaudeModel
from wakeline_brain.model import ModelError, ModelReply, ModelRequest, ToolUse

MODEL = "claude-test-model"
API_KEY = "test-key-not-real"

SYSTEM = "You are Wakeline's test agent. Be terse."
TOOLS = [
    {"name": "read_file", "description": "Read a file from the workspace.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "run", "description": "Run a shell command.",
     "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
]
MESSAGES = [
    {"role": "user", "content": "What is in README.md?"},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_01A", "name": "read_file", "input": {"path": "README.md"}},
    ]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "# Wakeline\nan event log"},
    ]},
]


def request(messages=MESSAGES, tools=TOOLS, max_tokens: int = 1234) -> ModelRequest:
    return ModelRequest(model=MODEL, system=SYSTEM, messages=messages, tools=tools,
                        max_tokens=max_tokens, session_id="sess-1", seq=7)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as running:
        yield running


@pytest.fixture
def api(server: FakeMessagesAPI) -> Iterator[FakeMessagesAPI]:
    server.reset()
    yield server
    server.reset()


def make_model(api: FakeMessagesAPI, max_retries: int = 2) -> ClaudeModel:
    return ClaudeModel(MODEL, API_KEY, base_url=api.base_url, max_retries=max_retries, timeout_s=5.0)


@pytest.fixture
async def model(api: FakeMessagesAPI) -> AsyncIterator[ClaudeModel]:
    claude = make_model(api)
    yield claude
    await claude.close()


async def test_text_reply_maps_text_usage_and_stop_reason(api, model) -> None:
    api.enqueue(text_message("The README describes an event log.", input_tokens=321, output_tokens=45))

    reply = await model.complete(request())

    assert reply == ModelReply(text="The README describes an event log.", reasoning=[], tool_uses=[],
                               usage=Usage(input_tokens=321, output_tokens=45), stop_reason="end_turn")
    assert len(api.requests) == 1


async def test_tool_use_reply_maps_to_tool_uses(api, model) -> None:
    api.enqueue(tool_use_message("run", {"cmd": "ls -la", "timeout": 30, "env": {"A": "1"}},
                                 text="I'll list the files.", id="toolu_fake_42",
                                 input_tokens=50, output_tokens=20))

    reply = await model.complete(request())

    assert reply.stop_reason == "tool_use"
    assert reply.tool_uses == [ToolUse(id="toolu_fake_42", name="run",
                                       input={"cmd": "ls -la", "timeout": 30, "env": {"A": "1"}})]
    assert reply.text == "I'll list the files."
    assert reply.usage == Usage(input_tokens=50, output_tokens=20)


async def test_request_carries_system_messages_tools_and_max_tokens(api, model) -> None:
    api.enqueue(text_message("ok"))

    await model.complete(request(max_tokens=1234))

    [received] = api.requests
    assert (received.method, received.path) == ("POST", "/v1/messages")
    # anthropic 2.10.0 sends `api_key=` as `Authorization: Bearer`, not `x-api-key`.
    assert credential(received.headers) == API_KEY
    assert received.headers["anthropic-version"]
    body = received.body
    assert body["model"] == MODEL
    assert body["system"] == SYSTEM
    assert body["messages"] == MESSAGES
    tool_results = [block for msg in body["messages"] if isinstance(msg["content"], list)
                    for block in msg["content"] if block["type"] == "tool_result"]
    assert tool_results == [{"type": "tool_result", "tool_use_id": "toolu_01A",
                             "content": "# Wakeline\nan event log"}]
    assert body["tools"] == TOOLS
    assert body["max_tokens"] == 1234
    assert not body.get("stream")


async def test_429_then_200_succeeds_after_one_retry(api, model) -> None:
    api.enqueue(error(429, "rate_limit_error", "Number of request tokens has exceeded your limit",
                      retry_after=FAST),
                text_message("after the rate limit"))

    reply = await model.complete(request())

    assert reply.text == "after the rate limit"
    assert len(api.requests) == 2
    assert [r.headers.get("x-stainless-retry-count") for r in api.requests] == ["0", "1"]
    assert api.requests[0].body == api.requests[1].body


async def test_529_then_500_then_200_succeeds_after_two_retries(api, model) -> None:
    api.enqueue(error(529, "overloaded_error", "Overloaded", retry_after=FAST),
                error(500, "api_error", "Internal server error", retry_after=FAST),
                text_message("third time lucky"))

    reply = await model.complete(request())

    assert reply.text == "third time lucky"
    assert len(api.requests) == 3
    assert api.pending == 0


@pytest.mark.parametrize("max_retries", [0, 2])
async def test_persistent_500_beyond_max_retries_is_model_error(api, max_retries: int) -> None:
    api.enqueue(*[error(500, "api_error", "Internal server error", retry_after=FAST)] * (max_retries + 1),
                text_message("never reached"))
    claude = make_model(api, max_retries=max_retries)
    try:
        with pytest.raises(ModelError, match="InternalServerError") as caught:
            await claude.complete(request())
    finally:
        await claude.close()

    assert isinstance(caught.value.__cause__, anthropic.InternalServerError)
    assert len(api.requests) == max_retries + 1
    assert api.pending == 1  # the success after the last allowed attempt was never asked for


async def test_non_retryable_error_is_model_error_without_retry(api, model) -> None:
    api.enqueue(error(400, "invalid_request_error", "messages: roles must alternate", retry_after=None),
                text_message("never reached"))

    with pytest.raises(ModelError, match="BadRequestError"):
        await model.complete(request())

    assert len(api.requests) == 1


async def test_unreachable_server_is_model_error() -> None:
    with FakeMessagesAPI() as gone:
        claude = make_model(gone, max_retries=0)
    try:
        with pytest.raises(ModelError, match="APIConnectionError"):
            await claude.complete(request())
    finally:
        await claude.close()


async def test_thinking_blocks_map_into_reasoning(api, model) -> None:
    api.enqueue(message([thinking_block("The user wants the README summarised."),
                         thinking_block("It is short; answer directly."),
                         text_block("It describes an event log.")], "end_turn"))

    reply = await model.complete(request())

    assert reply.reasoning == ["The user wants the README summarised.", "It is short; answer directly."]
    assert reply.text == "It describes an event log."
    assert reply.tool_uses == []


async def test_fake_rejects_requests_without_the_required_headers(api) -> None:
    """The header check is real: without it the adapter tests could not notice a missing key."""
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    api.enqueue(text_message("only for a complete request"))
    async with httpx.AsyncClient(base_url=api.base_url) as http:
        no_key = await http.post("/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"})
        no_version = await http.post("/v1/messages", json=body, headers={"x-api-key": API_KEY})
        complete = await http.post("/v1/messages", json=body,
                                   headers={"x-api-key": API_KEY, "anthropic-version": "2023-06-01"})
    assert (no_key.status_code, no_key.json()["error"]["type"]) == (401, "authentication_error")
    assert (no_version.status_code, no_version.json()["error"]["type"]) == (400, "invalid_request_error")
    assert complete.status_code == 200 and complete.json()["content"] == [text_block("only for a complete request")]
