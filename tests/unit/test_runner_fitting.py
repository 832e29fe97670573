"""fit_report: a tool result over the record budget is cut to fit, stays JSON, says so."""

from __future__ import annotations

import json
import os

from wakeline.contract.commands import ToolResultReport
from wakeline.contract.limits import input_budget
from wakeline.contract.fitting import fit_report
from wakeline_runner.tools import BashResult, FileEntry, ListFilesResult, ReadFileResult

BUDGET = input_budget(1_000_000)


def report_of(output: str) -> ToolResultReport:
    return ToolResultReport(session_id="s-1", tenant="default", tool_call_id="toolu_1", name="read_file",
                            output=output, runner="test-host")


def encoded(report: ToolResultReport) -> int:
    return len(report.model_dump_json().encode("utf-8"))


def test_a_result_within_the_budget_is_returned_unchanged() -> None:
    report = report_of(BashResult(exit_code=0, stdout="hi\n", stderr="").model_dump_json())
    assert fit_report(report, BUDGET) is report


def test_binary_file_content_is_cut_to_fit_and_keeps_its_shape() -> None:
    content = os.urandom(1_048_000).decode("utf-8", "replace").replace("\x00", "\ufffd")
    output = ReadFileResult(path="big.bin", content=content, size=1_048_000, offset=0, truncated=False)
    report = report_of(output.model_dump_json())
    assert encoded(report) > 1_000_000  # escaping makes it larger than the file

    fitted = fit_report(report, BUDGET)

    assert encoded(fitted) <= BUDGET
    shown = json.loads(fitted.output)
    assert (shown["truncated"], shown["original_bytes"]) == (True, len(report.output.encode()))
    assert shown["path"] == "big.bin" and shown["size"] == 1_048_000
    assert content.startswith(shown["content"]) and len(shown["content"]) == shown["cut_to_chars"] > 1000


def test_control_characters_that_grow_sevenfold_are_still_cut_to_fit() -> None:
    stdout = "\x01" * 900_000  # 1 byte each on disk, `\\u0001` (7 bytes) inside the report
    report = report_of(BashResult(exit_code=0, stdout=stdout, stderr="ok").model_dump_json())
    fitted = fit_report(report, BUDGET)
    assert encoded(fitted) <= BUDGET
    assert json.loads(fitted.output)["stdout"] == stdout[:json.loads(fitted.output)["cut_to_chars"]]


def test_a_long_listing_cuts_every_path_but_keeps_every_entry() -> None:
    entries = [FileEntry(path=f"{i:04d}/" + "d" * 4000, type="file", size=i) for i in range(1000)]
    report = report_of(ListFilesResult(path=".", entries=entries, truncated=False).model_dump_json())
    shown = json.loads(fit_report(report, BUDGET).output)
    assert len(shown["entries"]) == 1000 and shown["truncated"] is True
    assert all(e["path"].startswith(f"{e['size']:04d}/") for e in shown["entries"])


def test_an_output_that_is_not_json_becomes_json_text() -> None:
    report = report_of("x" * 2_000_000)  # e.g. recorded by an older runner
    shown = json.loads(fit_report(report, BUDGET).output)
    assert shown["text"] == "x" * shown["cut_to_chars"] and shown["original_bytes"] == 2_000_000


def test_an_output_too_large_even_without_its_strings_keeps_only_the_marks() -> None:
    report = report_of(json.dumps({"numbers": list(range(300_000))}))
    fitted = fit_report(report, BUDGET)
    shown = json.loads(fitted.output)
    assert shown["truncated"] is True and "numbers" not in shown and encoded(fitted) <= BUDGET
