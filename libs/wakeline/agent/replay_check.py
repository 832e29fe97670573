"""Replay against new code: would today's brain still do what a recorded session did?

`first_divergence(events, tools)` walks a recorded history (a fork's with its inherited
prefix) through the brain's pure decision code as it is now — `inputs.handle_input` for the
inputs it can rebuild from the log, `steps.next_step`, `context.plan_compaction` and
`memory.compaction_step` (the brain's read of the memory file before a compaction) for the
steps the brain takes on its own, `steps.model_drafts` for each recorded model reply — and
folds every recorded event with today's `fold`. It reports the first seq where the code
would now record something else, or would take a step the log does not hold, as Temporal's
replayer does for workflow histories. Pure: no model is called (the recorded replies are
the model's answers) and no tool runs.

The model's own token count that decided a compaction (`tokens_before` where
`tokens_before_source` is `count_tokens`) and its count of what was left
(`tokens_after`) are the model's answers too: the check re-plans with the recorded figure,
as Claude's brain decided with it, and derives the estimate where the estimate decided.
A read of the memory file takes the figure of the compaction it was read for (the count
that decided the read; a brain woken between the read and its result counts the same
request again, and should that count fail, the compaction records the estimate and the
read is judged by it).

A budget is decided again: the end it records before a model call, and the refusal or the
`budget_changed` a message carrying one records (the price that binds is taken as recorded,
the price table's answer, as a reply is the model's).

What it takes as recorded, unchecked: markers (woke, snapshots, titles, file references),
a turn queued for a running-session slot and the slot's grant (the turn then starts as
the code says),
the session's creation or fork, commands it cannot rebuild from their events (cancel,
delete, takeover, handback, a person's tool result), a session ended by an error (a
failed model call or a parked input: the failure is the recorded input), and one ended by its
tenant's daily token quota (`quota`: the tenant's count, read from Postgres, is the input).

Reading the histories is the callers' part: `replay_command` (`wakeline-replay-check`) reads
them from Postgres or JSON lines; the gateway hands over the history it read
(`GET …/replay?check=true`, and `wakeline replay --check` through the API).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from wakeline.contract import events as e
from wakeline.log.chain import Draft
from wakeline.log.fold import FoldError, apply
from wakeline.log.state import SessionState, evolve
from wakeline.agent.context import TokenCount, build_request, counted_after, plan_compaction
from wakeline.agent.inputs import handle_input
from wakeline.agent.memory import compaction_step
from wakeline.agent.model import ModelReply, ToolUse
from wakeline.agent.replay_inputs import recorded_input
from wakeline.agent.steps import CALL_MODEL, SYSTEM, model_drafts, next_step
from wakeline.agent.summary import model_compaction, writes_summary

# `turn_queued` is Postgres's answer (no running-session slot free), as a reply is the model's.
UNCHECKED = frozenset({"woke", "snapshot", "title_generated", "file_reference", "session_created", "forked",
                       "turn_queued"})
# a tool call by system:brain: its read of the memory file before a compaction (issue 11)
OWN_STEPS = frozenset({"turn_started", "turn_ended", "session_ended", "compaction", "tool_call"})


@dataclass(frozen=True)
class Divergence:
    seq: int
    recorded: str  # what the log holds at seq
    now: str  # what today's code would do there

    def line(self, session_id: str) -> str:
        return f"{session_id}: diverges at seq {self.seq}: the log holds {self.recorded}; the code now {self.now}"


def first_divergence(events: Sequence[e.Event], tools: list[dict[str, Any]]) -> Divergence | None:
    state, i = SessionState(), 0
    while i < len(events):
        event = events[i]
        if isinstance(event, e.ModelResponded) and i + len(event.payload.tool_call_ids) >= len(events):
            return None  # the log ends inside the reply's batch: a log still being written
        if isinstance(event, e.BudgetChanged) and i + 1 == len(events):
            return None  # the same, before the message it was sealed with
        expected = _expected(state, events, i, tools)
        if isinstance(expected, Divergence):
            return expected
        recorded = list(events[i:i + len(expected)]) if expected else _batch(events, i)
        for draft, got in zip(expected or [], recorded):
            if not _same(draft, got):
                return Divergence(got.seq, _describe(got), f"would record {_describe(draft)}")
        if expected and len(recorded) < len(expected):
            return Divergence(events[-1].seq + 1, "nothing more", f"would record {_describe(expected[len(recorded)])}")
        try:
            for got in recorded:
                state = apply(state, got)
        except FoldError as err:
            return Divergence(recorded[0].seq, _describe(recorded[0]), f"cannot fold it: {err}")
        i += len(recorded)
    return None


def _expected(state: SessionState, events: Sequence[e.Event], i: int,
              tools: list[dict[str, Any]]) -> list[Draft] | Divergence | None:
    """The drafts today's code makes where `events[i]` was recorded; None: take it as recorded."""
    event = events[i]
    if event.type in UNCHECKED:
        return None
    step = next_step(state) if state.status != "new" else None
    if step is None and state.awaiting_slot and event.type == "turn_started":
        step = next_step(evolve(state, awaiting_slot=False))  # the slot granted: an answer, like turn_queued
    if isinstance(event, e.ModelResponded):
        if step is not CALL_MODEL:
            return Divergence(event.seq, _describe(event), f"would not call the model here ({_step(step)})")
        return model_drafts(state, _reply(events, i), event.actor)
    if _own_step(event):
        if step is CALL_MODEL:
            return _compaction(state, events, i, tools)
        if not isinstance(step, list) or not step:  # (the model call is handled above)
            return Divergence(event.seq, _describe(event), "would wait for an input here")
        return step
    if isinstance(step, list) and step:  # an input, where the brain would already have stepped on its own
        return Divergence(event.seq, _describe(event), f"would first record {_describe(step[0])}")
    recorded = recorded_input(state, events, i)
    return handle_input(state, *recorded) if recorded is not None else None


def _compaction(state: SessionState, events: Sequence[e.Event], i: int,
                tools: list[dict[str, Any]]) -> list[Draft] | Divergence:
    """The compaction (or the read of the memory file that starts one) today's code would
    record before the model call at `events[i]`, decided by the figure the log recorded."""
    event = events[i]
    compacted = _compaction_of(events, i)
    compaction = plan_compaction(state, build_request(state, tools), _recorded_count(compacted))
    if compaction is None:
        return Divergence(event.seq, _describe(event), "would call the model (no compaction)")
    compaction = compaction_step(state, compaction)  # the memory file's read comes first
    if isinstance(compaction.payload, e.ToolCallPayload) or not isinstance(event, e.ContextCompacted):
        return [compaction]
    written = event.payload
    if written.summary_model and writes_summary(state.config.model):
        # the model's summary is its recorded output, like a model turn's reply
        reply = ModelReply(text=written.summary, usage=written.usage or e.Usage())
        compaction = model_compaction(compaction, reply, written.summary_model)
    if written.tokens_after_source == "count_tokens":  # the model's count of what was left: recorded output
        compaction = counted_after(compaction, TokenCount(written.tokens_after, written.tokens_after_source))
    return [compaction]


def _compaction_of(events: Sequence[e.Event], i: int) -> e.CompactionPayload | None:
    """The compaction recorded at `events[i]`, or for the brain's read of the memory file
    there, the compaction that read was for (the next one: the read decides nothing else)."""
    for event in events[i:]:
        if isinstance(event, e.ContextCompacted):
            return event.payload
        if isinstance(event, (e.ModelResponded, e.TurnEnded, e.SessionEnded)):
            return None
    return None


def _recorded_count(compacted: e.CompactionPayload | None) -> TokenCount | None:
    """The model's own count that decided a compaction, as the log recorded it (the API's
    answer is an input, like a reply); None where the estimate decided: it is re-derived."""
    if compacted is None or compacted.tokens_before_source == "estimate":
        return None
    return TokenCount(compacted.tokens_before, compacted.tokens_before_source)


def _batch(events: Sequence[e.Event], i: int) -> list[e.Event]:
    """An event taken as recorded; a fork's opening comes with the message its command
    carried, sealed in one go before the brain steps on its own."""
    end = i + 1
    if isinstance(events[i], e.SessionForked):
        while end < len(events) and events[end].causation_id == events[i].causation_id:
            end += 1
    return list(events[i:end])


def _own_step(event: e.Event) -> bool:
    if isinstance(event, e.UserMessageReceived):
        return event.payload.queued
    if isinstance(event, e.ContextCompacted):
        return True  # mechanical (system:brain) or written by the model (agent:<model>)
    if isinstance(event, e.SessionEnded) and event.payload.reason not in ("completed", "max_turns", "budget"):
        return False  # an error, a cancel: the recorded input is the cause
    return event.actor == SYSTEM and event.type in OWN_STEPS and event.causation_id is None


def _reply(events: Sequence[e.Event], i: int) -> ModelReply:
    """The recorded model output: the model turn and the tool calls it names."""
    turn = events[i].payload
    assert isinstance(turn, e.ModelTurnPayload)
    calls = {ev.payload.tool_call_id: ev.payload for ev in events[i + 1:i + 1 + len(turn.tool_call_ids)]
             if isinstance(ev, e.ToolCallRequested)}
    uses = [ToolUse(id=tid, name=calls[tid].name, input=calls[tid].input) for tid in turn.tool_call_ids if tid in calls]
    # With its blocks as recorded (issue 15): today's code records a reply's blocks as returned.
    return ModelReply(text=turn.text, reasoning=list(turn.reasoning), tool_uses=uses, usage=turn.usage,
                      stop_reason=turn.stop_reason, blocks=[dict(b) for b in turn.blocks])


def _same(draft: Draft, event: e.Event) -> bool:
    return (draft.type, draft.actor, draft.trust, draft.causation_id, draft.payload.model_dump(mode="json")) == (
        event.type, event.actor, event.trust, event.causation_id, event.payload.model_dump(mode="json"))


def _describe(item: Draft | e.Event) -> str:
    body = json.dumps(item.payload.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    return f"{item.type} by {item.actor} {body[:300]}"


def _step(step: object) -> str:
    if step is None:
        return "it would wait for an input"
    return f"it would record {_describe(step[0])}" if isinstance(step, list) and step else "nothing to do"


def verdict(session_id: str, events: Sequence[e.Event], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """One session's result as data: clean, or the first divergence."""
    found = first_divergence(events, tools)
    return {"session_id": session_id, "events": len(events), "clean": found is None,
            "divergence": None if found is None else {"seq": found.seq, "recorded": found.recorded, "now": found.now}}


def check_lines(histories: dict[str, Sequence[e.Event]], tools: list[dict[str, Any]]) -> tuple[list[str], int]:
    """One line per session and how many diverge."""
    lines, diverged = [], 0
    for session_id, events in histories.items():
        found = first_divergence(events, tools)
        diverged += found is not None
        lines.append(found.line(session_id) if found else f"{session_id}: replays cleanly ({len(events)} events)")
    return lines, diverged
