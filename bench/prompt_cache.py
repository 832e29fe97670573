"""Prompt cache: how much of each Claude request the prefix cache can serve, caching on vs off.

A 30-request session (a tool loop: 29 tool-use turns, then the answer) runs through the
brain's own code (fold, `build_request`, `model_drafts`, `next_step`, tool results as the
runner reports them) and the real `anthropic` SDK (`ClaudeModel`) against the local
Messages API server (`tests.fakes.messages_api`), which records every request body. No
Kafka or Postgres: what is measured is what the requests carry, not time.

For each request after the first, the figure is the share of its input (JSON characters
of its tools, system blocks and message blocks, in the API's prefix order, cache marks
left out) that sits before a breakpoint whose whole prefix is identical to a prefix the
previous request marked with a breakpoint: what that request wrote to the cache and this
one can read. With caching off there are no breakpoints, so the share is 0 and every
request pays the whole prefix again; on, it should be nearly all of it.

`run_mixed` measures the same over a session closer to a real one (`mixed_requests`):
extended thinking on (every reply starts with a signed thinking block, sent back), a
second user message after the first answer, and compactions whose summary the model
writes in a call of its own (`summary.summary_request`), decided on the local estimate
(`plan_compaction`; the actor asks the API's count for Claude, which moves only where a
compaction falls, not what a compaction does to the cache). The summary calls are their own prefix and are
left out of the chain; the first request after a compaction is reported apart: the summary
replaced the cached prefix, so only the tools and system prompt can be served then.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from tests.fakes.messages_api import Canned, FakeMessagesAPI, message, text_block, thinking_block, tool_use_block
from wakeline.contract import commands as c
from wakeline.log.chain import Draft, seal
from wakeline.log.fold import apply
from wakeline.log.state import SessionState
from wakeline.contract.tools import tool_schemas
from wakeline_brain.claude import ClaudeModel
from wakeline.agent.context import build_request, plan_compaction
from wakeline.agent.inputs import handle_input
from wakeline.agent.steps import CALL_MODEL, model_drafts, next_step
from wakeline.agent.summary import just_compacted, model_compaction, summary_request

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
OUTPUT = "".join(f"file_{i:03d}.py  {i * 37 % 5000:>6} bytes\n" for i in range(60))  # ~1.7 kB a result


def responder(turns: int):  # type: ignore[no-untyped-def]
    count = 0

    def answer(body: dict[str, Any]) -> Canned:
        nonlocal count
        count += 1
        if count < turns:
            return message([text_block(f"Step {count}: listing again."),
                            tool_use_block("list_files", {"path": f"dir{count}"}, id=f"toolu_{count:03d}")],
                           "tool_use")
        return message([text_block("All listed.")], "end_turn")
    return answer


class Session:
    """One session's log, sealed and folded as the brain does, without Kafka."""

    def __init__(self) -> None:
        self.state = SessionState()

    def append(self, drafts: list[Draft]) -> None:
        for draft in drafts:
            event = seal(draft, session_id="bench-cache", tenant="bench", seq=self.state.last_seq + 1,
                         prev_hash=self.state.last_hash, ts=T0 + timedelta(seconds=self.state.last_seq),
                         event_id=str(uuid.uuid4()))
            self.state = apply(self.state, event)


async def session_requests(turns: int = 30, cache: bool = True) -> list[dict[str, Any]]:
    """The request bodies the server received for one session of `turns` model calls."""
    with FakeMessagesAPI() as api:
        api.respond_with(responder(turns))
        model = ClaudeModel("claude-bench", "bench-key", base_url=api.base_url, max_retries=0, prompt_cache=cache)
        session = Session()
        session.append(handle_input(session.state, c.CreateSession(
            command_id="create", session_id="bench-cache", tenant="bench", actor="user:bench",
            message="List every directory, one call each.", config={"model": "claude-bench", "max_turns": turns + 5})))
        try:
            while (step := next_step(session.state)) is not None:
                if step is not CALL_MODEL:
                    session.append(step)  # type: ignore[arg-type]
                    continue
                reply = await model.complete(build_request(session.state, tool_schemas()))
                session.append(model_drafts(session.state, reply, "agent:claude-bench"))
                _answer_calls(session)
        finally:
            await model.close()
        return api.bodies()


def pieces(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The request in the cache's prefix order (tools, system, messages), one entry a block:
    its JSON without the cache mark, and whether it carries one."""
    out = []
    blocks = list(body.get("tools", []))
    system = body.get("system", "")
    blocks += system if isinstance(system, list) else [{"type": "text", "text": system}]
    for m in body["messages"]:
        content = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        blocks += [{**b, "role": m["role"]} for b in content]
    for block in blocks:
        bare = {k: v for k, v in block.items() if k != "cache_control"}
        out.append((json.dumps(bare, sort_keys=True), "cache_control" in block))
    return out


def cacheable_share(previous: dict[str, Any], current: dict[str, Any]) -> float:
    """The share of `current`'s input before its last breakpoint whose prefix the previous
    request also ended a breakpoint on (so it wrote that prefix to the cache)."""
    before, now = pieces(previous), pieces(current)
    written = {i for i, (_, marked) in enumerate(before) if marked}
    served = 0
    for i, (_, marked) in enumerate(now):
        if marked and i in written and [p for p, _ in now[: i + 1]] == [p for p, _ in before[: i + 1]]:
            served = i + 1
    total = sum(len(p) for p, _ in now)
    return sum(len(p) for p, _ in now[:served]) / total if total else 0.0


async def run(turns: int = 30) -> list[dict[str, Any]]:
    lines = []
    for cache in (True, False):
        bodies = await session_requests(turns, cache)
        shares = [cacheable_share(a, b) for a, b in zip(bodies, bodies[1:])]
        marks = max(sum(marked for _, marked in pieces(b)) for b in bodies)
        lines.append({"bench": "prompt_cache", "cache": "on" if cache else "off", "requests": len(bodies),
                      "max_breakpoints": marks, "cacheable_share_mean": round(statistics.fmean(shares), 4),
                      "cacheable_share_min": round(min(shares), 4),
                      "cacheable_share_last": round(shares[-1], 4),
                      "input_chars_last": sum(len(p) for p, _ in pieces(bodies[-1]))})
    return lines


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system", "")
    return system if isinstance(system, str) else "".join(b.get("text", "") for b in system)


def mixed_responder(answers_at: tuple[int, ...]):  # type: ignore[no-untyped-def]
    """Conversation call n (from 1) answers at `answers_at`, else asks for a listing; every
    reply starts with its thinking. A summary call gets a short summary."""
    count = 0

    def answer(body: dict[str, Any]) -> Canned:
        nonlocal count
        if _system_text(body).startswith("You are compacting"):
            return message([text_block("SUMMARY: directories listed so far, each with its files; nothing failed.")],
                           output_tokens=20)
        count += 1
        thinking = thinking_block(f"Call {count}: which directory is next?", f"sig-bench-{count:03d}")
        if count in answers_at:
            return message([thinking, text_block(f"Listed them all ({count}).")], "end_turn")
        return message([thinking, text_block(f"Step {count}: listing again."),
                        tool_use_block("list_files", {"path": f"dir{count}"}, id=f"toolu_{count:03d}")], "tool_use")
    return answer


async def mixed_requests(cache: bool = True, turns: int = 30, context_window: int = 8192) -> dict[str, Any]:
    """One mixed session's requests: the conversation's bodies in order, the summary calls'
    bodies, the indices (in the conversation's) of the first request after each compaction
    and of the first request after the second user message."""
    first_answer = turns // 2
    out: dict[str, Any] = {"bodies": [], "summaries": [], "after_compaction": [], "after_second_message": None}
    with FakeMessagesAPI() as api:
        api.respond_with(mixed_responder((first_answer, turns)))
        model = ClaudeModel("claude-bench", "bench-key", base_url=api.base_url, max_retries=0, prompt_cache=cache)
        session, second = Session(), "Now list them again, the other way round."
        session.append(handle_input(session.state, c.CreateSession(
            command_id="create", session_id="bench-cache", tenant="bench", actor="user:bench",
            message="List every directory, one call each.",
            config={"model": "claude-bench", "max_turns": turns + 5, "max_tokens": 4096, "thinking_budget": 1024,
                    "context_window": context_window})))
        compacted = False
        try:
            while True:
                step = next_step(session.state)
                if step is None and second:  # the first task answered: the user asks again
                    session.append(handle_input(session.state, c.PostMessage(
                        command_id="post", session_id="bench-cache", tenant="bench", actor="user:bench", text=second)))
                    second, out["after_second_message"] = "", len(out["bodies"])
                    continue
                if step is None:
                    break
                if step is not CALL_MODEL:
                    session.append(step)  # type: ignore[arg-type]
                    continue
                plan = None if just_compacted(session.state) else plan_compaction(
                    session.state, build_request(session.state, tool_schemas()))
                if plan is not None:  # as the actor: the model writes the summary, then the request is sent
                    summary = await model.complete(summary_request(session.state, plan))
                    out["summaries"].append(api.bodies()[-1])
                    session.append([model_compaction(plan, summary, "claude-bench")])
                    compacted = True
                    continue
                reply = await model.complete(build_request(session.state, tool_schemas()))
                if compacted:
                    out["after_compaction"].append(len(out["bodies"]))
                    compacted = False
                out["bodies"].append(api.bodies()[-1])
                session.append(model_drafts(session.state, reply, "agent:claude-bench"))
                _answer_calls(session)
        finally:
            await model.close()
    return out


async def run_mixed(turns: int = 30) -> list[dict[str, Any]]:
    lines = []
    for cache in (True, False):
        got = await mixed_requests(cache, turns)
        bodies = got["bodies"]
        shares = [cacheable_share(a, b) for a, b in zip(bodies, bodies[1:])]
        after = set(got["after_compaction"])
        steady = [s for i, s in enumerate(shares, start=1) if i not in after]
        second = got["after_second_message"]
        lines.append({"bench": "prompt_cache_mixed", "cache": "on" if cache else "off", "requests": len(bodies),
                      "summary_calls": len(got["summaries"]), "compactions_before": sorted(after),
                      "max_breakpoints": max(sum(marked for _, marked in pieces(b)) for b in bodies + got["summaries"]),
                      "cacheable_share_mean": round(statistics.fmean(shares), 4),
                      "cacheable_share_mean_between_compactions": round(statistics.fmean(steady), 4),
                      "cacheable_share_after_compaction": [round(shares[i - 1], 4) for i in sorted(after)],
                      "cacheable_share_after_second_message": round(shares[second - 1], 4) if second else None,
                      "cacheable_share_last": round(shares[-1], 4),
                      "input_chars_last": sum(len(p) for p, _ in pieces(bodies[-1]))})
    return lines


if __name__ == "__main__":
    for line in asyncio.run(run()) + asyncio.run(run_mixed()):
        print(json.dumps(line))


def _answer_calls(session) -> None:  # type: ignore[no-untyped-def]
    """Every call the model's turn asked for, answered at once with the same output."""
    for call in session.state.pending_tool_calls:
        session.append(handle_input(session.state, c.ToolResultReport(
            session_id="bench-cache", tenant="bench", tool_call_id=call.tool_call_id, name=call.name,
            output=OUTPUT, runner="bench")))
