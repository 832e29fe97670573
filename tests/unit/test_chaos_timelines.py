"""make chaos times each session's way back after a brain kill, moment by moment, from the logs."""

from __future__ import annotations

from datetime import datetime, timezone

from tests.factories import T0, at, draft, new_session_id, sealed
from tests.unit.session_log import created

from bench.chaos.ownership import Change
from bench.chaos.timelines import BrainLog, breakdown, recovery_timelines, worst
from wakeline.contract.topics import partition_for

PARTITIONS = 6
KILL = T0.timestamp() + 10


def line(t: float, text: str) -> str:
    stamp = datetime.fromtimestamp(t)
    return f"{stamp:%Y-%m-%d %H:%M:%S},{stamp.microsecond // 1000:03d} brain INFO x: {text}"


def tps(*partitions: int) -> str:
    return "{" + ", ".join(f"TopicPartition(topic='wakeline-churn.inbox', partition={p}), "
                           f"TopicPartition(topic='wakeline-churn.tool-results', partition={p})"
                           for p in partitions) + "}"


def session(sid: str, *after_kill: float) -> list:
    """Created and a tool call before the kill; `woke` markers at these seconds after it."""
    times = [T0.timestamp() + 1, T0.timestamp() + 2, *(KILL + s for s in after_kill)]
    drafts = [created(), draft("tool_call", "c1", tool_call_id="t1", name="bash", input={"command": "sleep 1"}),
              *(draft("woke", None, host="brain-1", reason="input", from_seq=2) for _ in after_kill)]
    return sealed(drafts, sid, stamps=at([datetime.fromtimestamp(t, timezone.utc) for t in times]))


def replacement(sid: str, p: int) -> BrainLog:
    return BrainLog.parse("brain-1.2", [
        line(KILL + 1.5, "metrics on http://127.0.0.1:1/metrics"),
        line(KILL + 2.0, "(Re-)joining group wakeline-churn-brain"),
        line(KILL + 2.1, "Joined group 'wakeline-churn-brain' (generation 7) with member_id m-1"),
        line(KILL + 2.2, f"Setting newly assigned partitions {tps(p)} for group wakeline-churn-brain"),
        line(KILL + 2.5, f"brain brain-1 owns partitions [{p}] (p{p}: fenced in 0.150 s, settled in 0.020 s, "
                          "offsets in 0.030 s)"),
        line(KILL + 3.0, f"woke session {sid} at seq 3 in 0.300 s (an input arrived) [session_id={sid} seq=3]")])


def test_a_session_of_the_killed_brain_is_timed_from_the_kill_through_its_replacement_to_its_next_event():
    sid = new_session_id()
    p = partition_for(sid, PARTITIONS)
    killed = Change(KILL - 5, "brain-1.1", frozenset({p}), frozenset({p}))
    [timeline] = recovery_timelines([(KILL, "brain-1.1")], [killed], {sid: session(sid, 2.8)}, PARTITIONS,
                                    [replacement(sid, p)])
    assert (timeline.kind, timeline.waker, timeline.waiting_for) == ("affected", "brain-1.2", "tool_call")
    assert timeline.phases() == {"started": 1.5, "rebalance": 0.5, "joined": 0.1, "assigned": 0.1,
                                 "writer_ready": 0.3, "wake_started": 0.2, "first_event": 0.1}
    assert round(timeline.total_s, 3) == 2.8
    row = timeline.as_row()
    assert row["after_kill_s"]["writer_ready"] == 2.5
    assert row["writer_fenced_settled_offsets_s"] == [0.15, 0.02, 0.03]


def test_a_brain_that_kept_the_partition_waits_for_no_assignment_and_its_time_goes_to_the_wake():
    sid = new_session_id()
    p = partition_for(sid, PARTITIONS)
    other = (p + 1) % PARTITIONS
    kept = BrainLog.parse("brain-2.1", [
        line(KILL - 60, "metrics on http://127.0.0.1:1/metrics"),
        line(KILL - 59, f"Setting newly assigned partitions {tps(p)} for group wakeline-churn-brain"),
        line(KILL + 1.0, f"woke session {sid} at seq 3 in 0.500 s (evicted)")])
    killed = Change(KILL - 5, "brain-1.1", frozenset({other}), frozenset({other}))
    [timeline] = recovery_timelines([(KILL, "brain-1.1")], [killed], {sid: session(sid, 0.7)}, PARTITIONS, [kept])
    assert timeline.kind == "survivors"
    assert timeline.phases() == {"started": None, "rebalance": None, "joined": None, "assigned": None,
                                 "writer_ready": None, "wake_started": 0.5, "first_event": 0.2}


def test_a_rebalance_under_way_at_the_kill_counts_from_the_kill_and_a_wake_after_the_next_event_is_not_it():
    sid = new_session_id()
    p = partition_for(sid, PARTITIONS)
    survivor = BrainLog.parse("brain-2.1", [
        line(KILL - 60, "metrics on http://127.0.0.1:1/metrics"),
        line(KILL - 1.0, "Heartbeat failed for group wakeline-churn-brain because it is rebalancing"),
        line(KILL + 6.0, "Joined group 'wakeline-churn-brain' (generation 9) with member_id m-2"),
        line(KILL + 6.1, f"Setting newly assigned partitions {tps(p)} for group wakeline-churn-brain"),
        line(KILL + 6.4, f"brain brain-2 owns partitions [{p}]"),
        line(KILL + 7.0, f"woke session {sid} at seq 3 in 0.100 s (an input arrived)"),
        line(KILL + 30.0, f"woke session {sid} at seq 9 in 0.100 s (evicted, an input arrived)")])
    killed = Change(KILL - 5, "brain-1.1", frozenset({p}), frozenset({p}))
    [timeline] = recovery_timelines([(KILL, "brain-1.1")], [killed], {sid: session(sid, 6.95)}, PARTITIONS,
                                    [survivor])
    phases = timeline.phases()
    assert (phases["started"], phases["rebalance"], phases["joined"]) == (None, 0.0, 6.0)
    assert timeline.moments["wake_started"] == KILL + 6.9


def test_a_session_never_woken_after_the_kill_has_only_its_next_event_and_sessions_done_are_left_out():
    sid, done = new_session_id(), new_session_id()
    ended = sealed([created(), draft("session_ended", "c2", reason="completed")], done,
                   stamps=at([T0, T0]))
    timelines = recovery_timelines([(KILL, "brain-1.1")], [], {sid: session(sid, 4.0), done: ended}, PARTITIONS,
                                   [])
    assert [(t.session_id, t.waker, t.total_s) for t in timelines] == [(sid, None, 4.0)]


def test_the_breakdown_gives_each_phase_its_median_and_max_and_the_worst_come_first():
    sids = [new_session_id() for _ in range(3)]
    logs = [replacement(s, partition_for(s, PARTITIONS)) for s in sids]
    changes = [Change(KILL - 5, "brain-1.1", frozenset(range(PARTITIONS)), frozenset(range(PARTITIONS)))]
    slow = {sids[0]: session(sids[0], 2.8), sids[1]: session(sids[1], 2.9), sids[2]: session(sids[2], 9.0)}
    timelines = recovery_timelines([(KILL, "brain-1.1")], changes, slow, PARTITIONS, logs)
    assert [t.session_id for t in worst(timelines, 2)] == [sids[2], sids[1]]
    figures = breakdown(timelines)
    assert figures["writer_ready"] == {"n": 3, "median_s": 0.3, "max_s": 0.3}
    assert figures["total"] == {"n": 3, "median_s": 2.9, "max_s": 9.0}
