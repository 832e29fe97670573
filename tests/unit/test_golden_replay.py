"""Replays the recorded session in golden/: today's code must read, verify and fold it unchanged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from wakeline.log.chain import first_broken_seq
from wakeline.contract.codec import encode
from wakeline.contract.events import Usage, parse_event
from wakeline.log.fold import fold
from wakeline.log.state import TextBlock, ToolResultBlock, ToolUseBlock, command_digest

LINES = Path(__file__).with_name("golden").joinpath("session_basic.jsonl").read_bytes().splitlines()


@pytest.fixture(scope="module")
def events():
    return [parse_event(line) for line in LINES]


def test_golden_log_parses_and_its_chain_verifies(events):
    assert [e.seq for e in events] == list(range(1, 18))
    assert first_broken_seq(events) is None


def test_golden_events_encode_back_to_the_recorded_bytes(events):
    assert [encode(e) for e in events] == LINES


def test_golden_hashes_are_sha256_of_sorted_compact_utf8_json():
    # Spelled out without wakeline so a change to the hashing rule cannot hide in chain.py.
    for line in LINES:
        body = json.loads(line)
        recorded = body.pop("hash")
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        assert hashlib.sha256(canonical).hexdigest() == recorded


def test_golden_session_folds_to_the_recorded_state(events):
    state = fold(events)
    assert (state.session_id, state.tenant, state.owner) == ("sess-golden-basic", "tenant-golden", "user:alice")
    assert (state.status, state.ended_reason, state.turns, state.in_turn) == ("idle", None, 2, False)
    assert (state.last_seq, state.last_hash) == (17, events[-1].hash)
    assert state.config.require_approval == ("bash",) and state.config.max_turns == 5
    assert state.usage == Usage(input_tokens=540, output_tokens=32)
    assert (state.title, state.files, state.hands, state.compactions) == ("Listing files", ("README.md",), None, 0)
    assert state.pending_tool_calls == () and state.awaiting_approval == frozenset()
    # Recorded before tool results were caused by `result:<id>`: its "tr-1" counts as a command.
    assert set(state.seen_commands) == {command_digest(i) for i in ("cmd-create", "cmd-1", "cmd-2", "tr-1", "cmd-3")}
    assert [(m.role, m.blocks, m.seq) for m in state.messages] == [
        ("user", (TextBlock("List the files, please."),), 2),
        ("assistant", (TextBlock("I'll look."), ToolUseBlock("tc-1", "bash", {"cmd": "ls"})), 4),
        ("user", (ToolResultBlock("tc-1", "README.md\nsetup.py\n"),), 8),
        ("assistant", (TextBlock("There are two files: README.md and setup.py."),), 10),
        ("user", (TextBlock("Thanks — café ☕"),), 14),
        ("assistant", (TextBlock("You're welcome."),), 16),
    ]


def test_golden_session_was_ended_before_the_last_message(events):
    before = fold(events[:13])
    assert (before.status, before.ended_reason) == ("ended", "completed")
    assert before.awaiting_approval == frozenset() and before.pending_tool_calls == ()
