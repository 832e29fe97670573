"""A file tool's call in one thread hop (issue 35): the tool, its report and its record go
to a worker together, and a call past its timeout is answered and recorded `timeout`, which
the thread that is still running never overwrites. The executor over real directories
(file tools only, no sandbox)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

from wakeline.contract.commands import ToolCallRequest
from wakeline_runner import executor as executor_module
from wakeline_runner import files
from wakeline_runner.executor import Executor
from wakeline_runner.isolation import Isolation
from wakeline_runner.records import read_result
from wakeline_runner.sandbox import Sandbox
from wakeline_runner.settings import RunnerSettings

TENANT, SESSION = "acme", "sess-files"


def _executor(tmp_path: Path) -> Executor:
    settings = RunnerSettings(sandbox_root=tmp_path / "sandboxes", use_bwrap="off", host="runner-test")
    isolation = Isolation(False, None, settings.tmp_bytes, "unit test: file tools only")
    return Executor(settings, Sandbox(settings, isolation))


def _request(call_id: str, name: str = "list_files", timeout_s: float = 30.0, **tool_input) -> ToolCallRequest:
    return ToolCallRequest(session_id=SESSION, tenant=TENANT, tool_call_id=call_id, name=name,
                           input=tool_input or {"path": "."}, causation_seq=3, timeout_s=timeout_s)


async def test_a_file_call_runs_reports_and_records_in_one_thread_hop(tmp_path: Path, monkeypatch) -> None:
    executor = _executor(tmp_path)
    await executor.execute(_request("warm"))  # the session's directories are made on its first call
    hops: list[str] = []
    to_thread = asyncio.to_thread

    def counted(fn, *args, **kwargs):
        hops.append(getattr(fn, "__name__", repr(fn)))
        return to_thread(fn, *args, **kwargs)

    monkeypatch.setattr(executor_module.asyncio, "to_thread", counted)
    write = await executor.execute(_request("tc-w", "write_file", path="a.txt", content="hello"))
    listed = await executor.execute(_request("tc-l"))
    assert not write.is_error and not listed.is_error
    assert [entry["path"] for entry in json.loads(listed.output)["entries"]] == ["a.txt"]
    assert len(hops) == 2  # one a call: before issue 35, one for the tool and one for its record
    dirs = executor.sandbox.open_session(TENANT, SESSION)
    recorded = read_result(dirs.call("tc-l"))
    assert recorded is not None and recorded[1] == listed  # recorded before it was answered

    again = await executor.execute(_request("tc-l"))
    assert again.replayed and again.output == listed.output and len(hops) == 2  # a replay runs nothing


async def test_a_file_call_past_its_timeout_is_answered_and_recorded_timeout(tmp_path: Path, monkeypatch) -> None:
    executor = _executor(tmp_path)
    await executor.execute(_request("warm"))
    release, finished = threading.Event(), threading.Event()
    list_files = files.list_files

    def slow(*args, **kwargs):
        release.wait(10)
        try:
            return list_files(*args, **kwargs)
        finally:
            finished.set()

    monkeypatch.setattr(files, "list_files", slow)
    report = await executor.execute(_request("tc-slow", timeout_s=0.2))
    assert report.is_error and report.error_kind == "timeout"
    dirs = executor.sandbox.open_session(TENANT, SESSION)
    assert read_result(dirs.call("tc-slow"))[1] == report  # type: ignore[index]

    release.set()  # the tool finishes after all: its thread records nothing over the answer sent
    assert await asyncio.to_thread(finished.wait, 10)
    await asyncio.sleep(0.1)
    assert read_result(dirs.call("tc-slow"))[1] == report  # type: ignore[index]
    replayed = await executor.execute(_request("tc-slow", timeout_s=0.2))
    assert replayed.replayed and replayed.error_kind == "timeout"


async def test_a_file_tool_that_raises_is_answered_and_recorded_crashed(tmp_path: Path, monkeypatch) -> None:
    executor = _executor(tmp_path)

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the tool")

    monkeypatch.setattr(files, "list_files", broken)
    report = await executor.execute(_request("tc-bug"))
    assert report.is_error and report.error_kind == "crashed" and "a bug in the tool" in report.output
    dirs = executor.sandbox.open_session(TENANT, SESSION)
    assert read_result(dirs.call("tc-bug"))[1] == report  # type: ignore[index]
