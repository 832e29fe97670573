"""`python -m bench.context_cost`: what a model call's request costs the brain, by how long
the session is (issue 35).

Before each model call the brain builds the request from the conversation and estimates its
tokens. Built whole (`build_request`, then `estimate_tokens`, a JSON dump of it), that cost
grows with the session; built from the last request's renderings (`ContextCache`, what the
brain does) only the new messages cost anything. One session's conversation is folded for
real, a tool round per step (a `list_files` call and its five-entry result), and at each
measured length both ways run side by side, alternating, on the same state: the cache from
the state just before (as the brain has it), the whole build from nothing. Microseconds per
request (p50 of `repeats`), and the ratio. No services: the brain's pure work only. At 1,000
steps the request is ~520 KB (~130k tokens by the estimate), under the default window's
compaction point (3/4 of 200k): a session that long, uncompacted, is real.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime

from wakeline.agent.context import build_request, estimate_tokens
from wakeline.agent.context_cache import ContextCache
from wakeline.agent.inputs import handle_input
from wakeline.agent.model import ModelReply, ToolUse
from wakeline.agent.steps import CALL_MODEL, model_drafts, next_step
from wakeline.contract import commands as c
from wakeline.contract.tools import tool_schemas
from wakeline.log.chain import Draft, seal
from wakeline.log.fold import apply
from wakeline.log.state import SessionState

TOOLS = tool_schemas()
RESULT = json.dumps({"path": ".", "entries": [{"path": f"f{i}.txt", "size": 10} for i in range(5)], "truncated": False})


def _sealed(drafts: list[Draft], state: SessionState, session_id: str) -> SessionState:
    for draft in drafts:
        state = apply(state, seal(draft, session_id=session_id, tenant="default", seq=state.last_seq + 1,
                                  prev_hash=state.last_hash, ts=datetime.now(UTC), event_id=str(uuid.uuid4())))
    return state


def _states_before_calls(steps: int) -> list[SessionState]:
    """The session's state before each of its model calls, `steps` tool rounds long."""
    session_id = str(uuid.uuid4())
    create = c.CreateSession(command_id="create-1", session_id=session_id, message="list the files, again and again",
                             config={"model": "scripted:bench", "max_turns": steps + 2})
    state = _sealed(handle_input(SessionState(), create, None), SessionState(), session_id)
    calls: list[SessionState] = []
    while len(calls) <= steps:
        step = next_step(state)
        if step is CALL_MODEL:
            calls.append(state)
            use = ToolUse(id=f"toolu_{len(calls)}", name="list_files", input={"path": "."})
            reply = ModelReply(text="", tool_uses=[use], stop_reason="tool_use")
            state = _sealed(model_drafts(state, reply, "agent:scripted:bench"), state, session_id)
        elif step is None:
            call = state.pending_tool_calls[0]
            result = c.ToolResultReport(session_id=session_id, tenant="default", tool_call_id=call.tool_call_id,
                                        name=call.name, output=RESULT, runner="bench")
            state = _sealed(handle_input(state, result, None), state, session_id)
        else:
            state = _sealed(step, state, session_id)
    return calls


def _us(fn) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1e6


def run(lengths: tuple[int, ...] = (20, 200, 1000), repeats: int = 15) -> list[dict]:
    states = _states_before_calls(max(lengths))
    lines = []
    for n in lengths:
        whole, cached = [], []
        for _ in range(repeats):
            cache = ContextCache()
            cache.build(states[n - 1], TOOLS)  # the request before: what the brain's cache holds
            whole.append(_us(lambda: estimate_tokens(build_request(states[n], TOOLS))))
            cached.append(_us(lambda: cache.build(states[n], TOOLS)))
        request, tokens = cache.build(states[n], TOOLS)
        assert request == build_request(states[n], TOOLS) and tokens.tokens == estimate_tokens(request)
        w, k = statistics.median(whole), statistics.median(cached)
        lines.append({"bench": "context_cost", "steps": n, "messages": len(states[n].messages),
                      "request_kb": round(len(json.dumps(request.messages)) / 1024, 1),
                      "whole_us": round(w, 1), "cached_us": round(k, 1), "ratio": round(k / w, 3)})
    return lines


if __name__ == "__main__":
    for line in run(*(tuple(int(n) for n in arg.split(",")) for arg in sys.argv[1:2])):
        print(json.dumps(line), flush=True)
