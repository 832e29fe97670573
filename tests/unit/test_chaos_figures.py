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
