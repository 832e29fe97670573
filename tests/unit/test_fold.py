"""`fold`: what a session's events mean for its state, and that only content events shape the transcript."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from wakeline.contract.events import MARKER_TYPES, Usage, is_marker
from wakeline.log.fold import FoldError, apply, fold
from wakeline.log.state import Message, TextBlock, ToolResultBlock, ToolUseBlock, command_digest

from tests.factories import SPEAKERS, draft, new_session_id, reseal, sealed

from .generated_logs import MARKERS, sessions, build
from .session_log import conversation, created, exchange


def statuses(events):
    return [fold(events[:n]).status for n in range(1, len(events) + 1)]


def test_one_turn_folds_to_user_assistant_tool_result_assistant():
    state = fold(conversation(8, new_session_id()))
    assert [(m.role, m.blocks) for m in state.messages] == [
        ("user", (TextBlock("question 1"),)),
        ("assistant", (TextBlock("Let me look."), ToolUseBlock("tc-1", "bash", {"cmd": "ls"}))),
        ("user", (ToolResultBlock("tc-1", "a.txt\n"),)),
        ("assistant", (TextBlock("answer 1"),)),
    ]
    assert state.messages[2].blocks[0].trust == "data"
    assert (state.owner, state.tenant, state.config.require_approval) == (SPEAKERS.user, "tenant-a", ("bash",))


def test_tool_call_is_pending_until_its_result():
    events = conversation(8, new_session_id())
    assert [c.tool_call_id for c in fold(events[:5]).pending_tool_calls] == ["tc-1"]
    assert fold(events).pending_tool_calls == ()


def test_status_goes_idle_running_idle_ended_and_a_new_message_continues_it():
    drafts = [created(), *exchange(1), draft("session_ended", reason="completed"),
              draft("user_message", "cmd-again", text="more?")]
    events = sealed(drafts, new_session_id())
    assert statuses(events) == ["idle", "idle"] + ["running"] * 5 + ["idle", "ended", "idle"]
    assert fold(events[:-1]).ended_reason == "completed"
    assert fold(events).ended_reason is None


def test_a_started_turn_awaits_the_model_until_its_reply():
    events = conversation(8, new_session_id())
    assert [fold(events[:n]).awaiting_model for n in (2, 3, 4, 8)] == [False, True, False, False]


def test_turns_and_usage_accumulate_over_turns():
    state = fold(sealed([created(), *exchange(1), *exchange(2)], new_session_id()))
    assert state.turns == 2
    assert state.usage == Usage(input_tokens=500, output_tokens=30)


def test_compaction_replaces_covered_messages_with_a_summary():
    drafts = [created(), *exchange(1), draft("compaction", summary="asked once", covered_from_seq=1,
              covered_to_seq=8, tokens_before=900, tokens_after=50), *exchange(2)]
    state = fold(sealed(drafts, new_session_id()))
    assert state.compactions == 1
    assert state.messages[0] == Message("user", (TextBlock("[Summary of earlier conversation]\nasked once"),), 9)
    assert state.messages[1].blocks == (TextBlock("question 2"),)
    assert len(state.messages) == 5


def test_a_compaction_stays_fresh_across_bookkeeping_until_the_conversation_moves():
    # A brain woken between a compaction and its model call must not compact again: what
    # says "compacted just now" is folded from the log, and a `woke` or a failed call is not speech.
    compaction = draft("compaction", summary="asked once", covered_from_seq=1, covered_to_seq=8, tokens_before=900,
                       tokens_after=50)
    drafts = [created(), *exchange(1), draft("user_message", "cmd-2", text="question 2"), draft("turn_started", turn=2),
              compaction, draft("woke", host="b2", reason="assigned", from_seq=1),
              draft("model_unavailable", error="overloaded", attempt=1, retry_in_s=1.0),
              draft("model_turn", text="answer 2", usage={"input_tokens": 90, "output_tokens": 5})]
    events = sealed(drafts, new_session_id())
    fresh = [fold(events[:n]).fresh_compaction for n in range(len(events) - 3, len(events) + 1)]
    assert fresh == [True, True, True, False]  # compaction, woke, model_unavailable, model_turn
    assert not any(fold(events[:n]).fresh_compaction for n in range(1, len(events) - 3))
    again = sealed([*drafts[:-1], draft("user_message", "cmd-3", text="question 3")], new_session_id())
    assert fold(again[:-1]).fresh_compaction and not fold(again).fresh_compaction


def test_approval_is_awaited_from_request_until_grant_or_result():
    first = exchange(1)[:4]
    events = sealed([created(), *first, draft("approval_requested", tool_call_id="tc-1"),
                     draft("approval_granted", "cmd-ok", tool_call_id="tc-1")], new_session_id())
    assert fold(events[:-1]).awaiting_approval == {"tc-1"}
    assert fold(events).awaiting_approval == frozenset()
    assert fold(events).pending_tool_calls[0].tool_call_id == "tc-1"


def test_takeover_gives_the_hands_to_a_person_until_handback():
    events = sealed([created(), draft("takeover", by="human:bob"), draft("handback", by="human:bob")],
                    new_session_id())
    assert [fold(events[:n]).hands for n in (1, 2, 3)] == [None, "human:bob", None]


def test_deleted_session_stays_deleted():
    events = sealed([created(), *exchange(1)[:3], draft("deleted", by=SPEAKERS.user),
                     draft("user_message", "cmd-late", text="hello?")], new_session_id())
    assert statuses(events)[-2:] == ["deleted", "deleted"]
    assert (fold(events).deleted_by, fold(events).in_turn) == (SPEAKERS.user, False)


def test_seen_commands_are_the_causation_ids_but_a_runners_result_ids():
    state = fold(conversation(8, new_session_id()))
    assert set(state.seen_commands) == {command_digest("cmd-create"), command_digest("cmd-1")}
    assert state.has_seen("cmd-1") and not state.has_seen("result:tc-1") and not state.has_seen("cmd-2")


def test_a_result_submitted_by_a_command_is_remembered_by_the_commands_id():
    events = sealed([created(), *exchange(1)[:4],
                     draft("tool_result", "cmd-submit", tool_call_id="tc-1", name="bash", output="by hand")],
                    new_session_id())
    assert fold(events).has_seen("cmd-submit")


def test_apply_refuses_a_gap():
    events = conversation(4, new_session_id())
    with pytest.raises(FoldError, match="expected seq 3, got 4"):
        apply(fold(events[:2]), events[3])


def test_apply_refuses_an_event_of_another_session():
    mine, theirs = conversation(3, new_session_id()), conversation(3, new_session_id())
    with pytest.raises(FoldError, match=theirs[0].session_id):
        apply(fold(mine[:2]), theirs[2])


def test_generated_sessions_use_every_marker_type():
    assert set(MARKERS) == MARKER_TYPES


def transcript(state):
    return [(m.role, m.blocks) for m in state.messages]


@given(sessions(), st.data())
def test_fold_is_deterministic_and_can_resume_from_any_point(session, data):
    events = build(*session)
    cut = data.draw(st.integers(0, len(events)), label="cut")
    assert fold(events) == fold(events)
    assert fold(events[cut:], fold(events[:cut])) == fold(events)


@given(sessions())
def test_markers_inserted_or_removed_never_change_the_messages(session):
    content, markers = session
    with_markers = build(content, markers)
    inserted = fold(build(content, [[] for _ in content]))
    removed = fold(reseal([e for e in with_markers if not is_marker(e)], "sess-generated"))
    assert transcript(fold(with_markers)) == transcript(inserted) == transcript(removed)
    assert fold(with_markers).pending_tool_calls == inserted.pending_tool_calls
