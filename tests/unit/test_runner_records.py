"""The call records: a damaged record or a failed write is this call's problem, not the runner's."""

from __future__ import annotations

import json
from pathlib import Path

from wakeline.contract.commands import ToolResultReport
from wakeline_runner.records import CallFiles, read_result, record_result, recorded_result
from wakeline_runner.tools import ToolError

REPORT = ToolResultReport(session_id="s-1", tenant="default", tool_call_id="toolu_1", name="bash",
                          output="{}", runner="test-host")


def test_a_damaged_record_becomes_a_crashed_result_that_says_it_was_not_rerun(tmp_path: Path) -> None:
    (tmp_path / "toolu_1.json").write_text('{"request_digest": "d", "rep')
    answer = recorded_result(CallFiles(tmp_path, "toolu_1"))
    assert isinstance(answer, ToolError) and answer.error_kind == "crashed"
    assert "not re-run" in answer.message


def test_a_record_of_an_older_shape_becomes_a_crashed_result(tmp_path: Path) -> None:
    (tmp_path / "toolu_1.json").write_text(json.dumps({"request_digest": "d", "report": {"output": 1}}))
    assert isinstance(recorded_result(CallFiles(tmp_path, "toolu_1")), ToolError)


def test_a_record_that_cannot_be_written_is_logged_not_raised(tmp_path: Path, caplog) -> None:
    missing = CallFiles(tmp_path / "gone", "toolu_1")  # as on a full or vanished disk
    record_result(missing, "d", REPORT)
    assert "publishing it unrecorded" in caplog.text


def test_a_written_record_reads_back(tmp_path: Path) -> None:
    files = CallFiles(tmp_path, "toolu_1")
    record_result(files, "d", REPORT)
    assert recorded_result(files) == read_result(files) == ("d", REPORT)
