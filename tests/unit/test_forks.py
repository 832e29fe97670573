"""Forks, pure parts: the fold of prefix + fork, where a fork may start, the brain's first
events of a fork, the archiver's link check, and the tree and cost read from logs."""

from __future__ import annotations

import pytest

from tests.factories import SPEAKERS, draft, new_session_id, sealed
from tests.unit.session_log import conversation
from wakeline.contract import commands as c
from wakeline.contract.events import ForkedPayload, SessionConfig
from wakeline.log.fold import FoldError, fold
from wakeline.storage.lineage import first_missing, unfinished_calls, whole_step_before
from wakeline.log.status import advance
from wakeline.storage.archive_rules import BrokenChain, runs_to_look_up, select_new
from wakeline.agent.forking import ForkRefused, fork_drafts
from wakeline.agent.steps import next_step
from wakeline_gateway.cost import session_cost
from wakeline_gateway.tree import steps

# conversation(): 1 created, 2 user_message, 3 turn_started, 4 model_turn (asks tc-1), 5 tool_call,
# 6 tool_result, 7 model_turn, 8 turn_ended, 9 user_message, 10 turn_started, 11 model_turn (tc-2), ...


def forked(parent: list, at: int, fork_id: str, *more) -> list:
    payload = ForkedPayload(parent_session_id=parent[0].session_id, fork_seq=at, parent_hash=parent[at - 1].hash,
                            config=SessionConfig(), owner=SPEAKERS.user)
    return sealed([draft(payload, "cmd-fork"), *more], fork_id, after=parent[at - 1])


def test_a_fork_folds_from_its_parents_prefix_and_is_its_own_session():
    parent = conversation(16, new_session_id())
    fork_id = new_session_id()
    own = forked(parent, 8, fork_id, draft("user_message", "cmd-f1", text="try another way"))
    state = fold(parent[:8] + own)
    expected = (fork_id, parent[0].session_id, 8, 10)
    assert (state.session_id, state.parent_session_id, state.fork_seq, state.last_seq) == expected
    assert [m.seq for m in state.messages] == [2, 4, 6, 7, 10]  # the prefix's conversation, then the fork's message
    assert state.status == "idle" and state.pending_tool_calls == ()
    assert next_step(state)[0].type == "turn_started"  # the fork's first turn, on the rebuilt conversation


def test_a_fork_taken_mid_turn_inherits_no_turn_in_flight():
    parent = conversation(16, new_session_id())
    state = fold(parent[:6] + forked(parent, 6, new_session_id()))  # after the result, before the answer
    assert (state.in_turn, state.awaiting_model, state.status) == (False, False, "idle")
    assert state.messages[-1].blocks[0].tool_use_id == "tc-1"  # the recorded result is reused, not re-run


def test_another_sessions_event_still_cannot_be_folded_in_unless_it_opens_a_fork():
    a, b = conversation(4, new_session_id()), conversation(5, new_session_id())
    with pytest.raises(FoldError):
        fold(a + b[4:])


@pytest.mark.parametrize("at, unfinished, whole", [(3, [], 0), (4, ["tc-1"], 3), (5, ["tc-1"], 3), (6, [], 0),
                                                   (8, [], 0), (11, ["tc-2"], 10)])
def test_a_seq_between_a_models_call_and_its_result_is_inside_an_unfinished_call(at, unfinished, whole):
    parent = conversation(16, new_session_id())
    assert unfinished_calls(parent[:at]) == unfinished
    assert whole_step_before(parent[:at], unfinished) == whole


def test_first_missing_names_the_first_seq_a_prefix_lacks():
    parent = conversation(8, new_session_id())
    assert first_missing(parent, 8) is None
    assert first_missing(parent[:3] + parent[4:], 8) == 4
    assert first_missing(parent[:5], 8) == 6


def fork_command(parent: list, at: int, **origin) -> c.CreateSession:
    return c.CreateSession(command_id="cmd-f", session_id="sess-fork", tenant=parent[0].tenant, actor=SPEAKERS.user,
                           message="again", fork_of=c.ForkOrigin(session_id=parent[0].session_id, seq=at, **origin))


def test_the_brain_opens_a_fork_with_forked_then_the_message():
    parent = conversation(16, new_session_id())
    drafts = fork_drafts(fold(parent[:8]), parent[:8], fork_command(parent, 8, hash=parent[7].hash))
    assert [d.type for d in drafts] == ["forked", "user_message"]
    assert drafts[0].payload.parent_hash == parent[7].hash and drafts[0].causation_id == "cmd-f"


@pytest.mark.parametrize("at, origin, why", [
    (5, {}, "unfinished tool call"), (8, {"hash": "0" * 64}, "has hash"), (8, {"seq": 9}, "has no seq")])
def test_the_brain_refuses_a_fork_the_gateway_would_have_refused(at, origin, why):
    parent = conversation(16, new_session_id())
    cmd = fork_command(parent, at)
    if origin:
        cmd = cmd.model_copy(update={"fork_of": cmd.fork_of.model_copy(update=origin)})
    with pytest.raises(ForkRefused, match=why):
        fork_drafts(fold(parent[:at]), parent[:at], cmd)


def test_the_archiver_links_a_forked_event_to_its_parents_hash_at_the_fork_point():
    parent = conversation(10, new_session_id())
    own = forked(parent, 8, new_session_id(), draft("user_message", "cmd-f1", text="x"))
    stored = {(e.session_id, e.seq): e.hash for e in parent}
    assert any(sid == parent[0].session_id and lo <= 8 <= hi for sid, lo, hi in runs_to_look_up(own))
    assert select_new(own, stored) == own
    with pytest.raises(BrokenChain):
        select_new(own, {k: v for k, v in stored.items() if k[1] != 8})  # the parent's seq 8 is not archived
    lying = forked(parent, 8, new_session_id())[0].model_copy(update={"prev_hash": parent[6].hash})
    with pytest.raises(BrokenChain):
        select_new([lying], stored)


def test_a_forks_row_opens_with_its_parent_and_fork_seq():
    parent = conversation(10, new_session_id())
    row = advance(None, forked(parent, 8, new_session_id())[0])
    assert (row.parent_session_id, row.fork_seq, row.last_seq, row.status) == (parent[0].session_id, 8, 9, "idle")


def test_tree_steps_carry_tool_outcomes_and_cost_sums_every_turns_usage():
    log = conversation(16, new_session_id())
    tree = steps(log)
    calls = [s for s in tree if s.kind == "tool_call"]
    assert [(s.seq, s.detail["outcome"], s.detail["result_seq"]) for s in calls] == [(5, "ok", 6), (12, "ok", 13)]
    cost = session_cost(log[0].session_id, log)
    turns = [e.payload.usage for e in log if e.type == "model_turn"]
    assert cost.tokens == {"input_tokens": sum(u.input_tokens for u in turns),
                           "output_tokens": sum(u.output_tokens for u in turns)}
    assert (cost.turns, cost.model_calls, cost.tool_calls) == (2, 4, 2)
    assert cost.upto_seq == log[-1].seq  # what it counted: a reader that saw more asks again
    assert session_cost(log[0].session_id, log[:9]).upto_seq == log[8].seq
    assert cost.model_wall_s == 4.0  # RECORDED stamps: a second per seq; 3->4, 6->7, 10->11, 13->14


def test_cost_reports_the_prompt_cache_hit_rate_and_what_caching_saved():
    drafts = [draft("session_created", "cmd-create", config={}, owner=SPEAKERS.user),
              draft("user_message", "cmd-1", text="q"), draft("turn_started", turn=1),
              draft("model_turn", text="a", usage={"input_tokens": 100, "output_tokens": 5,
                                                   "cache_creation_input_tokens": 1000}),
              draft("model_turn", text="b", usage={"input_tokens": 50, "output_tokens": 5,
                                                   "cache_read_input_tokens": 1000,
                                                   "cache_creation_input_tokens": 200}),
              draft("turn_ended", turn=1)]
    log = sealed(drafts, new_session_id())
    cost = session_cost(log[0].session_id, log)
    assert cost.tokens["cache_read_input_tokens"] == 1000 and cost.tokens["cache_creation_input_tokens"] == 1200
    assert cost.cache_hit_rate == round(1000 / (150 + 1200 + 1000), 4)
    assert cost.cache_saved_input_tokens == round(1000 * 0.9 - 1200 * 0.25, 1)  # 600.0
    plain = conversation(16, new_session_id())
    assert session_cost(plain[0].session_id, plain).cache_hit_rate == 0.0
