"""Writes recorded_budget.jsonl: a session stopped by its budget and continued with a raised one,
as today's brain records it.

Run `python -m tests.unit.golden.make_budget_golden` only to record it again on purpose; the
replay test (tests/unit/test_replay_check.py) exists to notice when today's code would decide
otherwise, and tests/unit/test_budget_replay.py reads its figures. Nothing here is written by
hand: the real `SessionActor` over a real `PartitionWriter` (its producer a `FakeProducer`), the
model's replies with their usage, and this script in the roles of the runner and the user. The
session: a Claude model's price bound with a budget at creation, two turns whose output reaches
the output cap, a message without a raise and one raising it too little (both refused
`budget_exhausted`), one raising it enough, and the last reply.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.unit.actor_partition import FakeModel, Partition, run_until_idle
from wakeline.agent.model import ModelReply, ToolUse
from wakeline.contract import commands as c
from wakeline.contract.codec import encode
from wakeline.contract.events import Usage
from wakeline.contract.topics import TOOL_RESULTS

SESSION_ID = "sess-golden-budget"
TENANT = "tenant-golden"
MODEL = "claude-sonnet-4-5"
USER, RUNNER = "user:alice", "golden-host"
TARGET = Path(__file__).with_name("recorded_budget.jsonl")
CACHED = {"cache_read_input_tokens": 5000, "cache_creation_input_tokens": 2000}


def listing(n: int, output_tokens: int) -> ModelReply:
    return ModelReply(text=f"Listing, take {n}.", tool_uses=[ToolUse(id=f"toolu_golden_{n}", name="list_files",
                                                                     input={"path": "."})],
                      usage=Usage(input_tokens=1000 * n, output_tokens=output_tokens, **CACHED),
                      stop_reason="tool_use")


def result(n: int) -> c.ToolResultReport:
    return c.ToolResultReport(session_id=SESSION_ID, tenant=TENANT, tool_call_id=f"toolu_golden_{n}",
                              name="list_files", output=json.dumps({"entries": []}), duration_ms=3, runner=RUNNER)


def message(command_id: str, text: str, budget: dict | None = None) -> c.PostMessage:
    return c.PostMessage(command_id=command_id, session_id=SESSION_ID, tenant=TENANT, actor=USER, text=text,
                         budget=budget)


async def record() -> list[bytes]:
    done = ModelReply(text="Both listings are empty. Done.", usage=Usage(input_tokens=3000, output_tokens=9))
    model = FakeModel(listing(1, 120), listing(2, 100), done)
    part = Partition()
    await part.writer.start()
    try:
        actor = part.actor(SESSION_ID, model)
        actor.tenant = TENANT
        steps: list[tuple[object, str] | object] = [
            c.CreateSession(command_id="cmd-golden-create", session_id=SESSION_ID, tenant=TENANT, actor=USER,
                            message="List the files, twice.",
                            config={"model": MODEL, "budget": {"output_tokens": 200, "usd": 0.05}}),
            (result(1), TOOL_RESULTS), (result(2), TOOL_RESULTS),  # the second turn reaches the output cap
            message("cmd-golden-more", "Once more, please."),  # no raise: refused
            message("cmd-golden-little", "Once more, please.", {"output_tokens": 210}),  # too little: refused
            message("cmd-golden-raised", "Once more, please.", {"output_tokens": 1000}),
        ]
        for step in steps:
            item, topic = step if isinstance(step, tuple) else (step, "")
            part.deliver(actor, item, topic) if topic else part.deliver(actor, item)
            await run_until_idle(actor)
    finally:
        await part.writer.close()
    events = part.events(SESSION_ID)
    assert [e.type for e in events if e.type in ("session_ended", "input_rejected", "budget_changed")] == [
        "session_ended", "input_rejected", "input_rejected", "budget_changed", "session_ended"], \
        [e.type for e in events]
    return [encode(event) for event in events]


if __name__ == "__main__":
    lines = asyncio.run(record())
    TARGET.write_bytes(b"\n".join(lines) + b"\n")
    print(f"wrote {len(lines)} events to {TARGET}")
