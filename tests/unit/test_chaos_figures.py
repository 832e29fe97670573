"""make chaos counts what went wrong: gaps, duplicates, unpaired calls, tools run twice."""

from __future__ import annotations

from tests.factories import draft, new_session_id, sealed
from tests.unit.session_log import created

from bench.chaos.figures import correctness


def completed_session(sid: str, **result):
    return sealed([created(),
                   draft("tool_call", "c1", tool_call_id="t1", name="bash",
                         input={"command": "echo step-1 >> runs.txt"}),
                   draft("tool_result", "t1", tool_call_id="t1", name="bash", output="ok", **result),
                   draft("session_ended", "c2", reason="completed")], sid)


def test_a_clean_run_counts_every_session_completed_and_nothing_else():
    sid = new_session_id()
    log = completed_session(sid)
    figures = correctness([sid], {sid: log}, {sid: log}, {sid: ["step-1"]})
    assert figures == {"sessions_started": 1, "sessions_completed": 1, "seq_gaps": 0, "duplicate_seqs": 0,
                       "unpaired_tool_calls": 0, "tools_run_twice": 0, "tools_never_run": 0, "tools_interrupted": 0,
                       "archive_faults": 0}


def test_gaps_duplicates_double_runs_and_archive_differences_are_each_counted():
    sid = new_session_id()
    log = completed_session(sid)
    broken = [log[0], log[1], log[1], log[3]]  # seq 2 twice, seq 3 missing: the result is lost
    figures = correctness([sid], {sid: broken}, {sid: log[:2]}, {sid: ["step-1", "step-1"]})
    assert figures["seq_gaps"] == 1 and figures["duplicate_seqs"] == 1
    assert figures["unpaired_tool_calls"] == 2  # one call seen twice, neither answered
    assert figures["tools_run_twice"] == 1 and figures["archive_faults"] == 1


def test_a_session_that_never_ended_is_started_but_not_completed():
    sid = new_session_id()
    figures = correctness([sid], {sid: completed_session(sid)[:2]}, {}, {})
    assert (figures["sessions_started"], figures["sessions_completed"]) == (1, 0)


def test_a_success_without_its_side_effect_is_a_fault_but_an_honest_crashed_answer_is_not():
    sid = new_session_id()
    lied = completed_session(sid)
    assert correctness([sid], {sid: lied}, {sid: lied}, {sid: []})["tools_never_run"] == 1
    honest = completed_session(sid, is_error=True, error_kind="crashed")
    figures = correctness([sid], {sid: honest}, {sid: honest}, {sid: []})
    assert (figures["tools_never_run"], figures["tools_interrupted"]) == (0, 1)


def test_make_chaos_fails_a_run_whose_recovery_is_past_a_bound_and_passes_one_within_them():
    from bench.chaos.__main__ import recovery_failures

    def run(median: float, p99: float, most: float, unowned: float) -> dict:
        affected = {"median_s": median, "p99_s": p99, "max_s": most}
        return {"next_event_after_brain_kill": {"affected": affected}, "longest_partition_unowned_s": unowned}

    assert recovery_failures(run(2.9, 9.5, 19.0, 11.0)) == []
    assert recovery_failures(run(3.1, 9.5, 19.0, 11.0)) == ["brain kill -> its sessions' next event median 3.1 s > 3 s"]
    assert len(recovery_failures(run(2.0, 30.0, 79.0, 79.0))) == 3  # p99, max and the ownerless partition
    assert recovery_failures(run(None, None, None, None)) == []  # type: ignore[arg-type]  # no brain killed


def test_a_brain_churn_under_new_names_is_held_to_the_session_timeout_plus_five_seconds_only():
    from bench.chaos.__main__ import recovery_failures

    def run(median: float, most: float) -> dict:
        affected = {"median_s": median, "p99_s": most, "max_s": most}
        return {"next_event_after_brain_kill": {"affected": affected}, "longest_partition_unowned_s": 7.0,
                "new_names": True}

    assert recovery_failures(run(8.0, 10.9)) == []
    assert recovery_failures(run(8.0, 11.5)) == ["brain kill -> its sessions' next event max 11.5 s > 11 s"]


def test_the_summary_spells_out_the_slowest_recovery_moment_by_moment():
    from bench.chaos.__main__ import summary

    row = {"session_id": "s-1", "partition": 3, "kind": "affected", "killed": "brain-1.4", "waker": "brain-1.5",
           "waiting_for": "tool_call", "total_s": 2.8, "writer_fenced_settled_offsets_s": [0.15, 0.02, 0.03],
           "after_kill_s": {"started": 1.5, "rebalance": None, "writer_ready": 2.5, "first_event": 2.8},
           "phases_s": {}}
    result = {"kills": 2, "brain_kills": 2, "kill_phase_s": 10, "sessions_completed": 1, "sessions_started": 1,
              "tools_interrupted": 0, "longest_partition_unowned_s": 2.5,
              **dict.fromkeys(("seq_gaps", "duplicate_seqs", "unpaired_tool_calls", "tools_run_twice",
                               "tools_never_run", "archive_faults"), 0),
              "next_event_after_brain_kill": {k: {"median_s": 1, "p99_s": 2, "max_s": 3}
                                              for k in ("affected", "survivors")},
              "recovery_timelines": {"affected": {"breakdown": {"total": {"n": 1, "median_s": 2.8, "max_s": 2.8}},
                                                  "worst": [row]}}}
    lines = summary(result)
    assert "total 2.8 / 2.8 (n 1)" in lines[3]
    assert lines[4].startswith("chaos: slow: 2.8 s, session s-1 p3 (waiting for tool_call; brain-1.4 killed")
    assert "started +1.5, writer ready +2.5, first event +2.8" in lines[4] and "rebalance" not in lines[4]
