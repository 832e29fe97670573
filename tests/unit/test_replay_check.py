"""Replay against new code: recorded sessions through today's decision code and fold.

`golden/recorded_*.jsonl` are whole histories the running code recorded (the e2e
suite's: a fork of a fork of a fork with its inherited prefix, and a session that
compacted; `make_claude_golden.py`'s: a Claude session with thinking, an approval, the
memory file's read and a summary the model wrote, decided by the API's token count; and
`make_budget_golden.py`'s: a session its budget stopped, refused a message, then continued
with a raised budget); they must replay cleanly. `session_basic.jsonl` was written by hand before
turns were one model call each, and is kept as is for the fold's byte-for-byte test: the
check reports exactly where today's brain would record something else.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wakeline.contract import events as e
from wakeline.log.chain import Draft
from wakeline.contract.events import parse_event
from wakeline.contract.tools import tool_schemas
from wakeline.agent import replay_check, steps
from wakeline.agent.replay_check import first_divergence

GOLDEN_DIR = Path(__file__).parent / "golden"
RECORDED = sorted(GOLDEN_DIR.glob("recorded_*.jsonl"))
# The recorded sessions by name: an empty or shrunken glob (a file renamed or lost) would
# otherwise parametrize the replay below over nothing, and pytest reports that as a skip.
RECORDED_NAMES = {"recorded_budget.jsonl", "recorded_claude_compaction.jsonl", "recorded_compaction.jsonl",
                  "recorded_fork_of_fork.jsonl"}


def golden(name: str | Path) -> list[e.Event]:
    path = name if isinstance(name, Path) else GOLDEN_DIR / name
    return [parse_event(line) for line in path.read_bytes().splitlines() if line.strip()]


def test_the_recorded_golden_sessions_are_all_there():
    assert {path.name for path in RECORDED} >= RECORDED_NAMES


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_every_recorded_golden_session_replays_cleanly_against_todays_code(path):
    log = golden(path)
    assert len(log) > 20
    assert first_divergence(log, tool_schemas()) is None


def test_the_hand_written_golden_log_diverges_where_todays_brain_decides_its_bash_call_otherwise():
    # Written by hand with `{"cmd": …}`: today's brain answers a call whose input does not
    # fit the tool's model with an error result (issue 15) instead of asking for approval.
    found = first_divergence(golden("session_basic.jsonl"), tool_schemas())
    assert found is not None and found.seq == 6
    assert "bash needs approval" in found.recorded and "invalid_input" in found.now


def test_a_brain_that_ends_a_session_without_ending_the_turn_diverges_at_the_first_turn_end(monkeypatch):
    def changed(state):  # the deliberate change: no turn_ended, straight to the end
        step = steps.next_step(state)
        if isinstance(step, list) and step and step[0].type == "turn_ended":
            return [Draft(payload=e.SessionEndedPayload(reason="completed"), actor=steps.SYSTEM, trust="instruction")]
        return step

    log = golden("recorded_fork_of_fork.jsonl")
    monkeypatch.setattr(replay_check, "next_step", changed)
    found = first_divergence(log, tool_schemas())
    first_turn_end = next(ev.seq for ev in log if ev.type == "turn_ended")
    assert found is not None and found.seq == first_turn_end
    assert found.recorded.startswith("turn_ended") and "would record session_ended" in found.now


def test_a_brain_that_no_longer_compacts_diverges_at_the_recorded_compaction(monkeypatch):
    log = golden("recorded_compaction.jsonl")
    monkeypatch.setattr(replay_check, "plan_compaction", lambda state, request, counted=None: None)
    found = first_divergence(log, tool_schemas())
    assert found is not None and found.seq == next(ev.seq for ev in log if ev.type == "compaction")
    assert found.now == "would call the model (no compaction)"


def test_a_log_cut_anywhere_replays_cleanly_but_a_step_missing_inside_it_does_not():
    log = golden("recorded_fork_of_fork.jsonl")
    for end in range(1, len(log)):  # a log being written: its end is never a fault
        assert first_divergence(log[:end], tool_schemas()) is None
    at = next(i for i, ev in enumerate(log) if ev.type == "turn_ended" and log[i + 1].type == "turn_started")
    found = first_divergence(log[:at] + log[at + 1:], tool_schemas())
    assert found is not None and found.seq == log[at + 1].seq
    assert found.recorded.startswith("turn_started") and "would record turn_ended" in found.now


def test_the_claude_golden_session_holds_what_it_records_and_a_brain_deciding_otherwise_diverges(monkeypatch):
    log = golden("recorded_claude_compaction.jsonl")
    types = [(ev.type, ev.actor) for ev in log]
    assert ("approval_granted", "user:alice") in types and ("tool_call", "system:brain") in types
    [compaction] = [ev for ev in log if isinstance(ev, e.ContextCompacted)]
    p = compaction.payload
    assert p.summary_model == "claude-golden" and p.usage is not None and p.memory is not None
    assert (p.tokens_before_source, p.tokens_after_source) == ("count_tokens", "count_tokens")
    assert any(b.get("signature") for ev in log if isinstance(ev, e.ModelResponded) for b in ev.payload.blocks)
    assert first_divergence(log, tool_schemas()) is None

    # A brain that took its own estimate over the API's count records other token figures.
    monkeypatch.setattr(replay_check, "_recorded_count", lambda compacted: None)
    found = first_divergence(log, tool_schemas())
    assert found is not None and found.seq == compaction.seq
    assert found.recorded.startswith("compaction by agent:claude-golden") and "would record compaction" in found.now
    # A brain that no longer compacts would not read the memory file for it.
    monkeypatch.undo()
    monkeypatch.setattr(replay_check, "plan_compaction", lambda state, request, counted=None: None)
    read = next(ev for ev in log if ev.type == "tool_call" and ev.actor == "system:brain")
    found = first_divergence(log, tool_schemas())
    assert found is not None and (found.seq, found.now) == (read.seq, "would call the model (no compaction)")
