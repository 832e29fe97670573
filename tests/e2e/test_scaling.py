"""More runners and brains: work spreads, partitions move, and no session gets two writers."""

from __future__ import annotations

import time

from tests.e2e.sessions import create_session, wait_ended, wait_for
from tests.e2e.stored_log import assert_log_whole


def test_two_runners_in_one_group_both_do_work(stack, client):
    runner_b = stack.start("runner-b", "runner")
    # Only once it holds partitions: on a busy machine its start and group join can take
    # longer than the twelve sessions do, and then one runner rightly did all the work.
    wait_for(lambda: "newly assigned partitions {TopicPartition" in runner_b.tail(200), 120,
             "runner-b to be assigned partitions", stack)
    sids = [create_session(client, "tools3") for _ in range(12)]  # all on one runner: p = 2 * 2**-12
    runners = set()
    for sid in sids:
        wait_ended(client, stack, sid, timeout=120)
        runners |= {e.actor for e in assert_log_whole(sid) if e.type == "tool_result"}
    assert len(runners) >= 2, runners


def test_a_second_brain_joining_mid_session_moves_partitions_without_two_writers(stack, client):
    # Twelve first: brain-b takes half the partitions, and with five the first ones all fell on
    # brain-a's half in one `make test` of 2026-12-06 (p = 2**-5 when brain-b joins at once; at
    # twelve, 2**-12), so no session moved and nothing was woken.
    sids = [create_session(client, "slowmodel") for _ in range(12)]
    brain_b = stack.start("brain-b", "brain")
    # Sessions keep starting (one a second, ~9 s each) until brain-b holds partitions, so some
    # are mid-session when theirs move: on a busy machine its start and join took longer than
    # ten sessions started at once took to finish (CI, load average 14: no session moved).
    while "owns partitions" not in brain_b.tail(400) and len(sids) < 60:
        time.sleep(1)
        sids.append(create_session(client, "slowmodel"))
    wait_for(lambda: "owns partitions" in brain_b.tail(400), 120, "brain-b to take partitions", stack)
    for sid in sids:
        session = wait_ended(client, stack, sid, timeout=150)
        assert session["ended_reason"] == "completed"
        assert_log_whole(sid)  # a second writer would show as a gap, a fork or a broken chain
    assert stack.services["archiver"].alive  # a conflicting (session_id, seq) would have stopped it
    writers = {e.payload.host for sid in sids for e in assert_log_whole(sid) if e.type == "woke"}
    assert "brain-b" in writers, writers
