"""Writes recorded_claude_compaction.jsonl: a Claude session as today's brain records it.

Run `python -m tests.unit.golden.make_claude_golden` only to record it again on purpose; the
replay test (tests/unit/test_replay_check.py) exists to notice when today's code would
decide otherwise. Nothing here is written by hand: the real `SessionActor` over a real
`PartitionWriter` (its producer a `FakeProducer`), the real `ClaudeModel` through the
`anthropic` SDK against the local Messages-API server (tests/fakes/messages_api.py), and
this script in the roles of the runner and the user. The session: extended thinking, a
tool call the user approves, the memory file written, then, past three quarters of the
window by the API's count, the brain's read of the memory file, the summary the model
writes (recorded with its usage and both token counts), and the last reply.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.fakes.messages_api import (
    Canned, FakeMessagesAPI, message, text_block, thinking_block, tool_use_block,
)
from tests.unit.actor_partition import Partition, run_until_idle
from wakeline.contract import commands as c
from wakeline.contract.codec import encode
from wakeline.contract.topics import TOOL_RESULTS
from wakeline_brain.claude import ClaudeModel

SESSION_ID = "sess-golden-claude"
TENANT = "tenant-golden"
MODEL = "claude-golden"
USER, RUNNER = "user:alice", "golden-host"
MEMORY = "# Notes\n- the code word is PELICAN\n"
TASK = "Remember the code word PELICAN in MEMORY.md, then count to 200. " + "Context to carry along. " * 170
TARGET = Path(__file__).with_name("recorded_claude_compaction.jsonl")


def _system(body: dict[str, Any]) -> str:
    system = body.get("system")
    return system if isinstance(system, str) else "".join(b["text"] for b in system or [])


def answer(body: dict[str, Any]) -> Canned:
    """The model's side: what a Claude model would answer at each point of the session."""
    usage = {"input_tokens": 40, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 120}
    if _system(body).startswith("You are compacting"):
        return message([text_block("SUMMARY: the user asked to keep PELICAN in MEMORY.md (written) and to "
                                   "count to 200 (bash, approved, ran).")], input_tokens=1100, output_tokens=28)
    if "[Summary of earlier conversation]" in str(body["messages"][0]["content"]):
        return message([thinking_block("Both done; say so.", signature="sig-golden-3"),
                        text_block("PELICAN is in MEMORY.md and the count ran. Done.")], output_tokens=14, **usage)
    results = sum(1 for m in body["messages"] for b in m["content"] if isinstance(b, dict)
                  and b.get("type") == "tool_result")
    if results == 0:
        return message([thinking_block("First the memory file, then the count.", signature="sig-golden-1"),
                        tool_use_block("write_file", {"path": "MEMORY.md", "content": MEMORY}, id="toolu_golden_w")],
                       "tool_use", output_tokens=60, **usage)
    # with thinking on, every reply starts with its thinking (the API refuses a tool turn without)
    return message([thinking_block("Now the count.", signature="sig-golden-2"),
                    tool_use_block("bash", {"command": "seq 1 200"}, id="toolu_golden_b")], "tool_use",
                   output_tokens=20, **usage)


def result(call_id: str, name: str, output: dict[str, Any]) -> c.ToolResultReport:
    return c.ToolResultReport(session_id=SESSION_ID, tenant=TENANT, tool_call_id=call_id, name=name,
                              output=json.dumps(output), duration_ms=12, runner=RUNNER)


async def record() -> list[bytes]:
    api = FakeMessagesAPI().start()
    api.respond_with(answer)
    model = ClaudeModel(MODEL, "test-key-not-real", base_url=api.base_url, max_retries=0)
    part = Partition()
    await part.writer.start()
    try:
        actor = part.actor(SESSION_ID, model)
        actor.tenant = TENANT
        part.deliver(actor, c.CreateSession(
            command_id="cmd-golden-create", session_id=SESSION_ID, tenant=TENANT, actor=USER, message=TASK,
            config={"model": MODEL, "context_window": 1024, "max_tokens": 2048, "thinking_budget": 1024,
                    "memory_file": "MEMORY.md", "require_approval": ["bash"]}))
        await run_until_idle(actor)
        part.deliver(actor, result("toolu_golden_w", "write_file", {"path": "MEMORY.md", "bytes": len(MEMORY)}),
                     TOOL_RESULTS)
        await run_until_idle(actor)
        part.deliver(actor, c.ApproveToolCall(command_id="cmd-golden-approve", session_id=SESSION_ID, tenant=TENANT,
                                              actor=USER, tool_call_id="toolu_golden_b"))
        await run_until_idle(actor)
        count = "\n".join(str(i) for i in range(1, 201)) + "\n"
        part.deliver(actor, result("toolu_golden_b", "bash", {"exit_code": 0, "stdout": count, "stderr": ""}),
                     TOOL_RESULTS)
        await run_until_idle(actor)
        read = next(e for e in part.events(SESSION_ID) if e.type == "tool_call" and e.actor == "system:brain")
        part.deliver(actor, result(read.payload.tool_call_id, "read_file",
                                   {"path": "MEMORY.md", "content": MEMORY, "size": len(MEMORY), "offset": 0,
                                    "truncated": False}), TOOL_RESULTS)
        await run_until_idle(actor)
    finally:
        await part.writer.close()
        await model.close()
        api.stop()
    events = part.events(SESSION_ID)
    assert events[-1].type == "session_ended", [e.type for e in events]
    return [encode(event) for event in events]


if __name__ == "__main__":
    lines = asyncio.run(record())
    TARGET.write_bytes(b"\n".join(lines) + b"\n")
    print(f"wrote {len(lines)} events to {TARGET}")
