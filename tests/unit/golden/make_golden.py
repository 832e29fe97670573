"""Writes session_basic.jsonl: one recorded session, sealed once and then kept as is.

Run `python -m tests.unit.golden.make_golden` only when the log's format changes on purpose;
the replay test exists to notice when it changes by accident. Every actor, trust, cause,
time and id is spelled out here, so the recording does not drift with the factories' defaults.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.factories import Stamps, draft, sealed
from wakeline.contract.codec import encode

SESSION_ID = "sess-golden-basic"
TENANT = "tenant-golden"
T0 = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
USER, AGENT, BRAIN, RUNNER = "user:alice", "agent:scripted:default", "system:brain", "runner:host-1"

STEPS = [  # (type, actor, trust, causation_id, payload)
    ("session_created", USER, "instruction", "cmd-create",
     {"config": {"require_approval": ["bash"], "max_turns": 5}, "owner": USER}),
    ("user_message", USER, "instruction", "cmd-1", {"text": "List the files, please."}),
    ("turn_started", BRAIN, "instruction", None, {"turn": 1}),
    ("model_turn", AGENT, "instruction", None,
     {"text": "I'll look.", "reasoning": ["ls is enough"], "usage": {"input_tokens": 120, "output_tokens": 15},
      "stop_reason": "tool_use", "tool_call_ids": ["tc-1"]}),
    ("tool_call", AGENT, "instruction", None, {"tool_call_id": "tc-1", "name": "bash", "input": {"cmd": "ls"}}),
    ("approval_requested", BRAIN, "instruction", None, {"tool_call_id": "tc-1", "reason": "bash needs approval"}),
    ("approval_granted", USER, "instruction", "cmd-2", {"tool_call_id": "tc-1"}),
    ("tool_result", RUNNER, "data", "tr-1",
     {"tool_call_id": "tc-1", "name": "bash", "output": "README.md\nsetup.py\n", "duration_ms": 42}),
    ("file_reference", RUNNER, "data", None, {"path": "README.md", "tool_call_id": "tc-1"}),
    ("model_turn", AGENT, "instruction", None,
     {"text": "There are two files: README.md and setup.py.", "usage": {"input_tokens": 200, "output_tokens": 12}}),
    ("turn_ended", BRAIN, "instruction", None, {"turn": 1}),
    ("title_generated", BRAIN, "instruction", None, {"title": "Listing files"}),
    ("session_ended", BRAIN, "instruction", None, {"reason": "completed"}),
    ("user_message", USER, "instruction", "cmd-3", {"text": "Thanks — café ☕"}),
    ("turn_started", BRAIN, "instruction", None, {"turn": 2}),
    ("model_turn", AGENT, "instruction", None,
     {"text": "You're welcome.", "usage": {"input_tokens": 220, "output_tokens": 5}}),
    ("turn_ended", BRAIN, "instruction", None, {"turn": 2}),
]


def sealed_lines() -> list[bytes]:
    drafts = [draft(type_, cause, actor=actor, trust=trust, **payload)
              for type_, actor, trust, cause, payload in STEPS]
    stamps = Stamps(ts=lambda seq: T0 + timedelta(seconds=seq, milliseconds=250),
                    event_id=lambda session_id, seq: f"ev-golden-{seq:03d}")
    return [encode(event) for event in sealed(drafts, SESSION_ID, tenant=TENANT, stamps=stamps)]


if __name__ == "__main__":
    target = Path(__file__).with_name("session_basic.jsonl")
    target.write_bytes(b"\n".join(sealed_lines()) + b"\n")
    print(f"wrote {len(STEPS)} events to {target}")
