"""`ContextCache` builds `build_request`'s request and `estimate_tokens`'s estimate, exactly,
for any conversation and any succession of states (appended, the last message replaced,
compacted, a smaller cap), while rendering each message once (issue 35)."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from wakeline.agent import context
from wakeline.agent.context import build_request, estimate_tokens
from wakeline.agent.context_cache import ContextCache, _joined_chars, _list_chars
from wakeline.contract.events import SessionConfig
from wakeline.contract.tools import tool_schemas
from wakeline.log.state import (
    Message, OtherBlock, RedactedThinkingBlock, SessionState, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock,
    evolve,
)

TOOLS = tool_schemas()
# Quotes, backslashes, a NUL, other control characters, non-ASCII and astral characters: what
# `json.dumps` escapes, and so what a summed length must count as it does.
texts = st.text(alphabet=st.sampled_from('ab "\\\x00\n\t\u00e9\u2713\U0001f600<>/'), max_size=40)
blocks = st.one_of(
    st.builds(TextBlock, texts),
    st.builds(ThinkingBlock, texts, texts),
    st.builds(RedactedThinkingBlock, texts),
    st.builds(OtherBlock, st.fixed_dictionaries({"type": st.just("server_tool_use"), "name": texts})),
    st.builds(ToolUseBlock, texts, texts,
              st.dictionaries(texts, st.one_of(texts, st.integers(), st.none()), max_size=3)),
    # past the smaller window's cap (1,024 characters a result) or not
    st.builds(ToolResultBlock, texts, st.one_of(texts, st.integers(0, 1500).map(lambda n: "r\u00e9" * (n // 2))),
              st.booleans()),
)
messages = st.builds(Message, st.sampled_from(["user", "assistant"]), st.lists(blocks, max_size=3).map(tuple),
                     st.integers(1, 10_000))


def _state(conversation: list[Message], window: int = 200_000) -> SessionState:
    return evolve(SessionState(), session_id="sess-1", last_seq=len(conversation),
                  config=SessionConfig(context_window=window), messages=tuple(conversation))


def _agrees(cache: ContextCache, state: SessionState) -> None:
    request, tokens = cache.build(state, TOOLS)
    expected = build_request(state, TOOLS)
    assert request == expected
    assert json.dumps(request.messages) == json.dumps(expected.messages)
    assert tokens.tokens == estimate_tokens(expected) and tokens.source == "estimate"


@settings(max_examples=300, deadline=None)
@given(st.lists(messages, max_size=12), st.lists(messages, max_size=4), st.integers(0, 3),
       st.sampled_from([1024, 200_000]))
def test_the_cache_builds_what_build_request_builds_state_after_state(first, more, cut, window):
    cache = ContextCache()
    _agrees(cache, _state(first, window))
    _agrees(cache, _state(first + more, window))  # appended: the first ones as they were
    _agrees(cache, _state(first + more, 1024 if window > 1024 else 200_000))  # the same ones, another cap
    _agrees(cache, _state(first + more, window))
    if first:
        _agrees(cache, _state(first[:-1] + more + first[-1:], window))  # the last replaced, the rest shared
    _agrees(cache, _state(more + first[cut:], window))  # compacted: a new front, a shared tail


def test_a_message_is_rendered_once_however_many_requests_it_is_in(monkeypatch) -> None:
    rendered: list[Message] = []
    render = context.render

    def counting(message, cap_chars):
        rendered.append(message)
        return render(message, cap_chars)

    monkeypatch.setattr("wakeline.agent.context_cache.render", counting)
    cache, conversation = ContextCache(), []
    for i in range(30):
        conversation.append(Message("assistant", (ToolUseBlock(f"tc-{i}", "list_files", {"path": "."}),), 2 * i))
        conversation.append(Message("user", (ToolResultBlock(f"tc-{i}", "x" * i),), 2 * i + 1))
        _agrees(cache, _state(conversation))
    assert len(rendered) == len(conversation) == len({id(m) for m in rendered})


@given(st.lists(st.lists(st.dictionaries(texts, texts, max_size=2), min_size=1, max_size=3), max_size=5),
       st.sampled_from(["user", "assistant"]))
def test_the_summed_lengths_are_json_dumps_lengths(contents, role):
    parts = [{"role": role, "content": content} for content in contents]
    assert _list_chars([len(json.dumps(p)) for p in parts]) == len(json.dumps(parts))
    if len(parts) >= 2:
        joined = {"role": role, "content": parts[0]["content"] + parts[1]["content"]}
        assert _joined_chars(len(json.dumps(parts[0])), len(json.dumps(parts[1])), role) == len(json.dumps(joined))
