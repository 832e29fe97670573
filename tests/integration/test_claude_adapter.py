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
    redacted_thinking_block,
    text_block,
    text_message,
    thinking_block,
    tool_use_message,
)
from wakeline.contract.events import Usage
from wakeline_brain.claude import ClaudeModel
from wakeline.agent.model import ModelError, ModelReply, ModelRequest, ToolUse

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
                               usage=Usage(input_tokens=321, output_tokens=45), stop_reason="end_turn",
                               blocks=[text_block("The README describes an event log.")])
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


async def test_request_carries_system_messages_tools_and_max_tokens(api) -> None:
    """With caching off the request is the brain's as it is; the caching tests check the marks."""
    api.enqueue(text_message("ok"))
    model = ClaudeModel(MODEL, API_KEY, base_url=api.base_url, max_retries=0, prompt_cache=False)
    try:
        await model.complete(request(max_tokens=1234))
    finally:
        await model.close()

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
    assert body["stream"] is True  # the adapter always streams (deltas for live viewers)
    assert "thinking" not in body


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


# --- thinking, caching, streaming, counting (issue 15) -----------------------------------------

THINKING_REPLY = [thinking_block("List first, then read.", "EqQBCkgIARABGAIiQL-sig"), redacted_thinking_block(),
                  text_block("Looking."), {"type": "tool_use", "id": "toolu_9", "name": "run", "input": {"cmd": "ls"}}]


async def test_thinking_and_redacted_thinking_come_back_as_blocks_with_their_signature(api, model) -> None:
    api.enqueue(message(THINKING_REPLY, "tool_use"))

    # The first message only: MESSAGES ends on a tool result whose turn has no thinking, which
    # the API (and the fake) refuses with thinking on.
    reply = await model.complete(ModelRequest(model=MODEL, system=SYSTEM, messages=MESSAGES[:1], tools=TOOLS,
                                              max_tokens=4096, thinking_budget=2048, session_id="s", seq=1))

    assert reply.blocks == THINKING_REPLY  # streamed, reassembled, exactly as sent
    assert reply.reasoning == ["List first, then read.", "[redacted thinking]"]
    assert api.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}


async def test_deltas_reach_the_sink_in_order_and_make_the_text(api, model) -> None:
    api.enqueue(message([thinking_block("Short."), text_block("The README describes an event log.")]))
    deltas: list[tuple[str, str]] = []

    async def sink(kind: str, text: str) -> None:
        deltas.append((kind, text))
    reply = await model.complete(request(), sink)

    assert "".join(t for k, t in deltas if k == "text") == reply.text == "The README describes an event log."
    assert "".join(t for k, t in deltas if k == "thinking") == "Short."
    assert len([d for d in deltas if d[0] == "text"]) == 2  # it streamed in pieces, not one at the end


async def test_a_stream_cut_part_way_is_a_retryable_error_and_no_partial_reply(api, model) -> None:
    api.enqueue(message([text_block("this will be cut off half way")], cut_after=4))
    seen: list[str] = []

    async def sink(kind: str, text: str) -> None:
        seen.append(text)
    with pytest.raises(ModelError) as caught:
        await model.complete(request(), sink)
    assert caught.value.retryable
    assert seen == ["this will be c"]  # the viewer saw the partial text; the caller got no reply


async def test_usage_carries_the_cache_figures(api, model) -> None:
    api.enqueue(message([text_block("ok")], input_tokens=12, output_tokens=3, cache_creation_input_tokens=900,
                        cache_read_input_tokens=4000))
    reply = await model.complete(request())
    assert reply.usage == Usage(input_tokens=12, output_tokens=3, cache_creation_input_tokens=900,
                                cache_read_input_tokens=4000)


def marks(body: dict) -> list[str]:
    """Where a request's breakpoints are: tool names, "system", or "m<i>.<j>" blocks."""
    out = [f"tool:{t['name']}" for t in body.get("tools", []) if "cache_control" in t]
    out += ["system" for b in body["system"] if "cache_control" in b] if isinstance(body["system"], list) else []
    for i, m in enumerate(body["messages"]):
        if isinstance(m["content"], list):
            out += [f"m{i}.{j}" for j, b in enumerate(m["content"]) if "cache_control" in b]
    return out


async def test_breakpoints_on_tools_system_and_the_newest_prefix_stay_where_they_were(api, model) -> None:
    conversation = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    for turn in range(4):
        api.enqueue(message([text_block("ok")]))
        await model.complete(request(messages=[dict(m) for m in conversation]))
        conversation += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{turn}", "name": "run",
                                                            "input": {"cmd": "ls"}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{turn}",
                                                       "content": "a"}]}]
    bodies = api.bodies()
    assert marks(bodies[0]) == ["tool:run", "system", "m0.0"]
    for n, body in enumerate(bodies[1:], start=1):
        last = len(body["messages"]) - 1
        assert marks(body) == ["tool:run", "system", f"m{last - 2}.0", f"m{last}.0"]  # 4: the API's limit
        # the previous request's newest breakpoint is one of this one's, over the same prefix
        previous = bodies[n - 1]["messages"]
        assert [m["role"] for m in body["messages"][: len(previous)]] == [m["role"] for m in previous]
        assert body["messages"][len(previous) - 1] == previous[-1]
    assert "cache_control" not in str(conversation)  # the brain's request is not changed


async def test_thinking_blocks_get_no_breakpoint(api, model) -> None:
    api.enqueue(message([text_block("ok")]))
    paused = [{"role": "user", "content": [{"type": "text", "text": "go"}]},
              {"role": "assistant", "content": [thinking_block("hm"), text_block("so")]}]
    await model.complete(request(messages=paused))
    assert marks(api.bodies()[0])[-1] == "m1.1"


async def test_retry_after_is_honoured(api, model) -> None:
    api.enqueue(error(529, "overloaded_error", "Overloaded", retry_after="0.6"), text_message("after the wait"))
    reply = await model.complete(request())
    assert reply.text == "after the wait"
    assert len(api.requests) == 2
    # the SDK waited what the server asked, not its own 0.5 s * 2**n backoff (jittered below 0.5)
    assert api.received_at[1] - api.received_at[0] >= 0.55


async def test_exhausted_overload_is_retryable_and_a_bad_request_is_not(api) -> None:
    claude = make_model(api, max_retries=1)
    try:
        api.enqueue(error(529, "overloaded_error", "Overloaded"), error(529, "overloaded_error", "Overloaded"))
        with pytest.raises(ModelError) as overloaded:
            await claude.complete(request())
        api.enqueue(error(400, "invalid_request_error", "bad", retry_after=None))
        with pytest.raises(ModelError) as refused:
            await claude.complete(request())
    finally:
        await claude.close()
    assert overloaded.value.retryable and not refused.value.retryable


async def test_count_tokens_asks_the_api(api, model) -> None:
    counted = await model.count_tokens(request())
    [received] = api.requests
    assert received.path == "/v1/messages/count_tokens"
    assert "max_tokens" not in received.body and received.body["messages"][0]["content"][-1]["cache_control"]
    assert counted == len(__import__("json").dumps(received.body, sort_keys=True)) // 4


async def test_fake_refuses_more_than_four_breakpoints_and_one_on_thinking_as_the_api_does(api) -> None:
    """The checks are real: a brain that marked a fifth block, or a thinking block, would fail
    loudly against the fake as it would against the API."""
    def body(marked_messages: int, thinking_marked: bool = False) -> dict:
        mark = {"cache_control": {"type": "ephemeral"}}
        messages = [{"role": "user" if i % 2 == 0 else "assistant",
                     "content": [{"type": "text", "text": f"m{i}", **mark}]}
                    for i in range(marked_messages)] or [{"role": "user", "content": "hi"}]
        if thinking_marked:
            messages += [{"role": "assistant", "content": [{**thinking_block("hm"), **mark}]}]
        return {"model": MODEL, "max_tokens": 5, "system": [{"type": "text", "text": SYSTEM, **mark}],
                "messages": messages}
    api.enqueue(text_message("only for a valid request"))
    headers = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
    async with httpx.AsyncClient(base_url=api.base_url, headers=headers) as http:
        five = await http.post("/v1/messages", json=body(4))
        on_thinking = await http.post("/v1/messages", json=body(1, thinking_marked=True))
        four = await http.post("/v1/messages", json=body(3))
    assert (five.status_code, five.json()["error"]["type"]) == (400, "invalid_request_error")
    assert "A maximum of 4 blocks with cache_control" in five.json()["error"]["message"]
    assert on_thinking.status_code == 400 and "cache_control" in on_thinking.json()["error"]["message"]
    assert four.status_code == 200 and four.json()["content"] == [text_block("only for a valid request")]


async def test_with_thinking_on_a_tool_result_whose_turn_lost_its_thinking_is_refused(api, model) -> None:
    api.enqueue(text_message("only for the valid request"))
    thinking_on = {"tools": TOOLS, "max_tokens": 4096, "thinking_budget": 2048, "session_id": "s", "seq": 1}

    with pytest.raises(ModelError, match="BadRequestError.*Expected `thinking` or `redacted_thinking`") as refused:
        await model.complete(ModelRequest(model=MODEL, system=SYSTEM, messages=MESSAGES, **thinking_on))
    assert refused.value.retryable is False
    unsigned = [MESSAGES[0], {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"},
                                                               *MESSAGES[1]["content"]]}, MESSAGES[2]]
    with pytest.raises(ModelError, match="signature: Field required"):
        await model.complete(ModelRequest(model=MODEL, system=SYSTEM, messages=unsigned, **thinking_on))
    assert api.pending == 1  # refused before any scripted answer was used

    kept = [MESSAGES[0], {"role": "assistant", "content": [THINKING_REPLY[0], THINKING_REPLY[1],
                                                           *MESSAGES[1]["content"]]}, MESSAGES[2]]
    reply = await model.complete(ModelRequest(model=MODEL, system=SYSTEM, messages=kept, **thinking_on))
    assert reply.text == "only for the valid request"
    assert len(api.bodies()) == 3
