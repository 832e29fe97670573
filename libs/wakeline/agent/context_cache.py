"""`ContextCache`: one session's model requests, each message rendered and measured once.

`build_request` renders every message of the conversation for every model call, and the
token estimate (`estimate_tokens`) dumps the whole request to JSON to count its characters:
both grow with the session: 8.3 ms of the brain's CPU a model call at step 1,000 here,
against 0.15 ms at step 20 (issue 35; `python -m bench.context_cost`).
A session's successive states share their messages (the fold appends, and replaces only
the message an event adds to), so this keeps the last state's messages, each one's
rendering and the length of its JSON, and the merged messages of its request. The next
state's request takes what begins the same (the same message objects, compared in C) as it
was, and renders and merges only what follows. The request is `build_request`'s, field for
field, and the estimate `estimate_tokens`'s, to the character: the lengths are summed as
`json.dumps` lays them out (`_list_chars`, `_joined_chars`), which the tests hold against
`json.dumps` itself. A compaction (a new first message) or another cap starts over.

What it keeps is the last state's messages and their renderings: about the conversation's
size again, per session at work in a brain. The brain drops it once the session is out of its
turn (`CompactionCounts.forget`).
"""

from __future__ import annotations

import json
import operator
from bisect import bisect_left
from typing import Any

from wakeline.agent.context import CHARS_PER_TOKEN, TokenCount, render, request_with, result_cap_chars
from wakeline.agent.model import ModelRequest
from wakeline.log.state import Message, SessionState

# The JSON around a message's content blocks, besides its role: `{"role": ` + role +
# `, "content": [` ... `]}`, with `json.dumps`'s default separators.
_AROUND_CONTENT = len('{"role": ') + len(', "content": [') + len("]}")


class ContextCache:
    def __init__(self) -> None:
        # The last state's messages, the cap they were rendered with, and per message its
        # rendering and the length of its JSON.
        self._messages: tuple[Message, ...] = ()
        self._cap = -1
        self._parts: list[tuple[dict[str, Any], int]] = []
        # The request's messages (`context._merge` of the renderings), their JSON lengths,
        # and the index of the message each of them starts with.
        self._merged: list[dict[str, Any]] = []
        self._lengths: list[int] = []
        self._starts: list[int] = []

    @property
    def holding(self) -> bool:
        return bool(self._messages)

    def build(self, state: SessionState, tools: list[dict[str, Any]]) -> tuple[ModelRequest, TokenCount]:
        """`build_request(state, tools)` and `estimated` of it."""
        cap_chars = result_cap_chars(state)
        shared = _shared_prefix(self._messages if cap_chars == self._cap else (), state.messages)
        parts = self._parts[:shared]
        for message in state.messages[shared:]:
            view = render(message, cap_chars)
            parts.append((view, len(json.dumps(view))))
        # The merge is redone from the start of the last merged message the shared ones began
        # (a message after them may join it); the merged messages before it stand.
        last = bisect_left(self._starts, shared) - 1 if shared else -1
        keep, begin = (last, self._starts[last]) if last >= 0 else (0, 0)
        merged, lengths, starts = self._merged[:keep], self._lengths[:keep], self._starts[:keep]
        _merge_from(parts, begin, merged, lengths, starts)
        self._messages, self._cap, self._parts = state.messages, cap_chars, parts
        self._merged, self._lengths, self._starts = merged, lengths, starts
        request = request_with(state, tools, list(merged), validate=False)
        return request, TokenCount((len(request.system) + _list_chars(lengths)) // CHARS_PER_TOKEN)


def _merge_from(parts: list[tuple[dict[str, Any], int]], begin: int, merged: list[dict[str, Any]],
                lengths: list[int], starts: list[int]) -> None:
    """`context._merge` of the renderings from `parts[begin]` on, onto `merged` (with each
    merged message's JSON length and the index of the message it starts with)."""
    for index in range(begin, len(parts)):
        message, length = parts[index]
        if not message["content"]:
            continue
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {"role": message["role"], "content": merged[-1]["content"] + message["content"]}
            lengths[-1] = _joined_chars(lengths[-1], length, message["role"])
        else:
            merged.append(message)
            lengths.append(length)
            starts.append(index)


def _shared_prefix(old: tuple[Message, ...], new: tuple[Message, ...]) -> int:
    """How many messages `new` begins with that are `old`'s own (the same objects), compared
    in C rather than one by one in Python: the only part of a build that grows with the session."""
    n = min(len(old), len(new))
    try:
        return list(map(operator.is_, old[:n], new[:n])).index(False)
    except ValueError:
        return n


def _joined_chars(first: int, second: int, role: str) -> int:
    """The JSON length of two messages of `role`, both with content, as one: the first's
    blocks, `, `, then the second's, inside one message's brackets."""
    return first + second - (_AROUND_CONTENT + len(json.dumps(role))) + len(", ")


def _list_chars(lengths: list[int]) -> int:
    """The JSON length of a list whose items' JSON has `lengths`: `[` a, `, ` b ... `]`."""
    return 2 + sum(lengths) + len(", ") * max(len(lengths) - 1, 0)
