"""One call's output or input never stops a runner, on the real Kafka broker.

Each test runs a runner in-process through the `harness` fixture (its own consumer group
and sandbox root; see runner_harness.py), feeds it one bad call, and asserts three things:
the bad call gets a result (or a dead letter), the runner task is still running, and calls
of other sessions sent after it kept completing (counted). Start the broker first:
`bash deploy/kafka/kafka.sh up`. With CI=true an unreachable broker fails the tests.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from runner_harness import GATED, Harness, others_keep_completing, stdout_of, wait_until
from wakeline.contract.commands import ToolCallRequest, ToolResultReport
from wakeline.transport.kafka_io import send_keyed
from wakeline.contract.limits import input_budget
from wakeline.contract.topics import TOOL_CALLS, partition_for, record_key
from wakeline_runner.isolation import probe
from wakeline_runner.records import CallFiles, write_result
from wakeline_runner.sandbox import Sandbox
from wakeline_runner.executor import request_digest

pytestmark = pytest.mark.kafka
BIG_FILE = "head -c 1048000 /dev/urandom > big.bin"
READ_BIG = {"path": "big.bin", "max_bytes": 1048576}


async def send(harness: Harness, session_id: str, name: str, tool_input: dict, call_id: str | None = None,
               issued_at: datetime | None = None) -> ToolCallRequest:
    request = ToolCallRequest(session_id=session_id, tenant="default",
                              tool_call_id=call_id or f"toolu_{uuid.uuid4().hex}", name=name, input=tool_input,
                              timeout_s=30, causation_seq=1, issued_at=issued_at or datetime.now(timezone.utc))
    await send_keyed(harness.producer, TOOL_CALLS, session_id, request, harness.kafka.partitions)
    return request


def encoded(report: ToolResultReport) -> int:
    return len(report.model_dump_json().encode("utf-8"))


async def write_big_file(harness: Harness, session_id: str) -> None:
    request, _ = await harness.call(session_id, BIG_FILE)
    assert not (await harness.result(request)).is_error


async def test_an_oversized_read_file_is_cut_to_fit_and_the_runner_keeps_serving(harness: Harness) -> None:
    session_id = str(uuid.uuid4())
    async with harness.runner_running() as runner:
        await write_big_file(harness, session_id)
        request = await send(harness, session_id, "read_file", READ_BIG)
        report = await harness.result(request)
        assert await others_keep_completing(harness) == 6
        assert not runner.done()
    shown = json.loads(report.output)
    assert (report.is_error, shown["truncated"], shown["size"]) == (False, True, 1_048_000)
    assert shown["original_bytes"] > 1_000_000 and encoded(report) <= input_budget(harness.kafka.max_record_bytes)
    assert 0 < len(shown["content"]) == shown["cut_to_chars"]


async def test_a_result_recorded_too_large_before_the_fix_is_replayed_cut_with_no_crash_loop(harness: Harness) -> None:
    """An older runner recorded the full result and died publishing it; its successors replay it."""
    session_id = str(uuid.uuid4())
    async with harness.runner_running():
        await write_big_file(harness, session_id)
    request = ToolCallRequest(session_id=session_id, tenant="default", tool_call_id=f"toolu_{uuid.uuid4().hex}",
                              name="read_file", input=READ_BIG, causation_seq=2)
    content = (harness.work(session_id) / "big.bin").read_bytes().decode("utf-8", "replace").replace("\0", "?")
    full = json.dumps({"path": "big.bin", "content": content, "size": 1048000, "offset": 0, "truncated": False})
    older_runner = f"older-{uuid.uuid4().hex[:12]}"
    harness.hosts.add(older_runner)  # a replay carries the report of the runner that ran the call
    old = ToolResultReport(session_id=session_id, tenant="default", tool_call_id=request.tool_call_id,
                           name="read_file", output=full, runner=older_runner)
    calls = harness.work(session_id).parent / "calls"
    write_result(CallFiles(calls, request.tool_call_id), request_digest(request), old)
    for restart in range(2):  # each successor is handed the same call again
        async with harness.runner_running() as runner:
            await send(harness, session_id, "read_file", READ_BIG, call_id=request.tool_call_id)
            report = await harness.result(request, count=restart + 1)
            assert await others_keep_completing(harness, 3) == 3
            assert not runner.done()
        assert report.replayed and json.loads(report.output)["truncated"] is True
        assert encoded(report) <= input_budget(harness.kafka.max_record_bytes)


async def test_a_result_the_broker_refuses_for_size_becomes_a_too_large_error(harness: Harness) -> None:
    # A runner configured above the topic's max.message.bytes: its producer sends, the broker refuses.
    session_id = str(uuid.uuid4())
    async with harness.runner_running(max_record_bytes=4_000_000) as runner:
        await write_big_file(harness, session_id)
        request = await send(harness, session_id, "read_file", READ_BIG)
        report = await harness.result(request)
        assert await others_keep_completing(harness) == 6
        assert not runner.done()
    assert (report.is_error, report.error_kind) == (True, "too_large")
    assert "size" in json.loads(report.output)["message"]


async def test_an_old_call_that_started_is_adopted_not_expired(harness: Harness) -> None:
    session_id, call_id = str(uuid.uuid4()), f"toolu_{uuid.uuid4().hex}"
    settings = harness.settings(host="a-runner-that-dies")
    sandbox = Sandbox(settings, probe(settings))
    dirs = sandbox.open_session("default", session_id)
    started = asyncio.create_task(sandbox.run_bash(dirs, call_id, GATED, 30))
    await wait_until(lambda: (dirs.work / "runs").exists(), what="the tool to start")
    started.cancel()  # that runner is gone; its tool runs on
    await asyncio.gather(started, return_exceptions=True)
    long_ago = datetime.now(timezone.utc) - timedelta(seconds=settings.stale_after_s + 100)
    async with harness.runner_running():
        adopted = await send(harness, session_id, "bash", {"command": GATED}, call_id=call_id, issued_at=long_ago)
        never_started = await send(harness, str(uuid.uuid4()), "bash", {"command": "echo no"}, issued_at=long_ago)
        assert (await harness.result(never_started)).error_kind == "expired"
        (dirs.work / "go").touch()
        report = await harness.result(adopted)
        assert await others_keep_completing(harness) == 6
    assert (report.is_error, stdout_of(report)) == (False, "finished\n")
    assert (dirs.work / "runs").read_text() == "run\n"


async def test_inputs_that_used_to_stop_the_runner_each_get_a_result(harness: Harness) -> None:
    session_id = str(uuid.uuid4())
    async with harness.runner_running() as runner:
        await harness.result((await harness.call(session_id, "mkdir d; touch d/ok $'d/\\xff\\xfe'"))[0])
        listing = await send(harness, session_id, "list_files", {"path": "d"})
        nul_name = await send(harness, session_id, "no\x00such\x07tool", {})
        huge = await send(harness, session_id, "bash", {"command": "#" * 900_000})
        naive = await send_raw_naive_issued_at(harness, session_id)
        corrupt = await send_with_corrupt_record(harness, session_id)
        reports = [await harness.result(r) for r in (listing, nul_name, huge, naive, corrupt)]
        assert await others_keep_completing(harness) == 6
        assert not runner.done()
    paths = {e["path"] for e in json.loads(reports[0].output)["entries"]}
    assert paths == {"d/ok", "d/\ufffd\ufffd"}
    assert [r.error_kind for r in reports[1:]] == ["unknown_tool", "invalid_input", None, "crashed"]
    assert "\x00" not in reports[1].name
    assert stdout_of(reports[3]) == "naive\n"
    assert not (harness.work(session_id) / "ran").exists()


async def send_raw_naive_issued_at(harness: Harness, session_id: str) -> ToolCallRequest:
    """A foreign producer's call whose issued_at has no time zone."""
    request = ToolCallRequest(session_id=session_id, tenant="default", tool_call_id=f"toolu_{uuid.uuid4().hex}",
                              name="bash", input={"command": "echo naive"}, causation_seq=1)
    value = json.loads(request.model_dump_json()) | {"issued_at": datetime.utcnow().isoformat()}
    await harness.producer.send_and_wait(TOOL_CALLS, json.dumps(value).encode(), key=record_key(session_id),
                                         partition=partition_for(session_id, harness.kafka.partitions))
    return request


async def send_with_corrupt_record(harness: Harness, session_id: str) -> ToolCallRequest:
    """A call whose result record on disk is damaged: answered, not re-run, not fatal."""
    call_id = f"toolu_{uuid.uuid4().hex}"
    (harness.work(session_id).parent / "calls" / f"{call_id}.json").write_text('{"request_digest": "x", "rep')
    return await send(harness, session_id, "bash", {"command": "echo must-not-run >> ran"}, call_id=call_id)
