"""The runner service against the real Kafka broker: results, replays, isolation, dead letters.

Each test starts its own runner in-process through the `harness` fixture (see
runner_harness.py: a fresh consumer group at the current end of `wakeline.tool-calls`, its
own sandbox root, results filtered by its sessions and hosts) and uses fresh session ids.
Start the broker first: `bash deploy/kafka/kafka.sh up`. With CI=true an unreachable broker
fails the tests.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid

import pytest
from aiokafka import TopicPartition

from runner_harness import GATED, Harness, Watch, processes_with, session_on, stdout_of, wait_until
from wakeline.contract.codec import DeadLetter
from wakeline.transport.kafka_io import make_consumer
from wakeline.contract.topics import DEAD_LETTER, TOOL_CALLS, partition_for, record_key

pytestmark = pytest.mark.kafka


async def test_a_bash_call_produces_a_result(harness: Harness) -> None:
    async with harness.runner_running(host="test-runner-one"):
        request, _ = await harness.call(str(uuid.uuid4()), "echo hello; pwd")
        report = await harness.result(request)
    assert (report.is_error, report.replayed, report.name) == (False, False, "bash")
    assert stdout_of(report) == "hello\n/work\n"  # where its work dir is mounted, not the host's path
    assert report.runner == "test-runner-one"


async def test_a_reissued_call_returns_the_recorded_result_and_its_effect_happens_once(harness: Harness) -> None:
    session_id = str(uuid.uuid4())
    async with harness.runner_running():
        request, _ = await harness.call(session_id, "echo once >> counter; wc -l < counter")
        first = await harness.result(request)
        await harness.call(session_id, request.input["command"], call_id=request.tool_call_id)
        second = await harness.result(request, count=2)
    assert (first.replayed, second.replayed) == (False, True)
    assert second.output == first.output and stdout_of(first) == "1\n"
    assert (harness.work(session_id) / "counter").read_text() == "once\n"


async def test_a_slow_call_does_not_delay_another_sessions_call_on_the_same_partition(harness: Harness) -> None:
    slow_session = str(uuid.uuid4())
    partitions = harness.kafka.partitions
    quick_session = session_on(partition_for(slow_session, partitions), partitions)
    async with harness.runner_running() as runner:
        slow, slow_sent = await harness.call(slow_session, GATED)
        await wait_until(lambda: (harness.work(slow_session) / "runs").exists(), what="the slow tool to start")
        quick, quick_sent = await harness.call(quick_session, "echo quick")
        assert stdout_of(await harness.result(quick)) == "quick\n"
        # The slow call is still running, so the group's commit must not have passed it.
        tp = TopicPartition(TOOL_CALLS, slow_sent.partition)
        assert await _committed(harness, tp) <= slow_sent.offset
        (harness.work(slow_session) / "go").touch()
        assert stdout_of(await harness.result(slow)) == "finished\n"
        await wait_until_async(lambda: _committed(harness, tp), lambda c: c > quick_sent.offset, runner)


async def test_a_timed_out_call_kills_its_whole_process_group(harness: Harness) -> None:
    marker = str(random.randrange(10**8, 10**9))
    async with harness.runner_running():
        request, _ = await harness.call(str(uuid.uuid4()), f"sleep 1000.{marker} & sleep 1001.{marker}",
                                        timeout_s=3)
        await wait_until(lambda: len(processes_with(f".{marker}")) >= 2, what="the tool's sleeps to start")
        report = await harness.result(request)
    assert (report.is_error, report.error_kind) == (True, "timeout")
    await wait_until(lambda: not processes_with(f".{marker}"), 5, "the background sleep to be killed too")


async def test_the_runners_secrets_do_not_reach_a_tool(harness: Harness, monkeypatch) -> None:
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    monkeypatch.setenv("RUNNER_TEST_API_KEY", secret)
    async with harness.runner_running():
        request, _ = await harness.call(
            str(uuid.uuid4()), "env; echo ---; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; true")
        report = await harness.result(request)
    output = stdout_of(report)
    assert secret not in report.output
    names = {line.split("=", 1)[0] for line in output.split("---")[0].splitlines()}
    assert names <= {"PATH", "HOME", "LANG", "TERM", "PWD", "SHLVL", "_", "OLDPWD", "TMPDIR", "USER", "LOGNAME"}


async def test_a_malformed_record_is_dead_lettered_and_the_next_call_is_served(harness: Harness) -> None:
    session_id = str(uuid.uuid4())
    letters = Watch(harness.kafka, DEAD_LETTER, DeadLetter.model_validate_json)
    await letters.start()
    try:
        async with harness.runner_running() as runner:
            await harness.producer.send_and_wait(
                TOOL_CALLS, b'{"session_id": "no closing brace"', key=record_key(session_id),
                partition=partition_for(session_id, harness.kafka.partitions))
            request, _ = await harness.call(session_id, "echo still serving")
            report = await harness.result(request)
            letter = (await letters.wait_for(lambda d: d.key == session_id, runners=(runner,)))[0]
    finally:
        await letters.consumer.stop()
    assert stdout_of(report) == "still serving\n"
    assert (letter.service, letter.topic) == ("runner", TOOL_CALLS)
    assert letter.reason


async def test_a_runner_stopped_mid_tool_is_succeeded_by_one_that_adopts_it(harness: Harness) -> None:
    session_id = str(uuid.uuid4())
    async with harness.runner_running(shutdown_drain_s=0):
        request, _ = await harness.call(session_id, GATED)
        await wait_until(lambda: (harness.work(session_id) / "runs").exists(), what="the tool to start")
    # The first runner is gone without committing the call; its tool is still running.
    async with harness.runner_running():
        (harness.work(session_id) / "go").touch()
        report = await harness.result(request)
    assert (report.is_error, stdout_of(report)) == (False, "finished\n")
    assert (harness.work(session_id) / "runs").read_text() == "run\n"
    assert (harness.work(session_id) / "counter").read_text() == "line\n"
    assert [r for r in harness.results.seen if harness.ours(r, request)] == [report]


async def test_a_rebalance_mid_call_runs_nothing_twice_and_every_partition_stays_served(harness: Harness) -> None:
    session_id, partitions = str(uuid.uuid4()), harness.kafka.partitions
    runner_b = f"test-b-{uuid.uuid4().hex[:8]}"
    async with harness.runner_running():
        gated, _ = await harness.call(session_id, GATED)
        await wait_until(lambda: (harness.work(session_id) / "runs").exists(), what="the tool to start")
        async with harness.runner_running(host=runner_b):
            deadline = time.monotonic() + 60
            while True:  # probe every partition until runner-b answers: the group has rebalanced
                probes = [(await harness.call(session_on(p, partitions), "echo probe"))[0] for p in range(partitions)]
                answered_by = {(await harness.result(probe)).runner for probe in probes}
                if runner_b in answered_by:
                    break
                assert time.monotonic() < deadline, "runner-b never got a partition"
            (harness.work(session_id) / "go").touch()
            await harness.result(gated)
    reports = [r for r in harness.results.seen if harness.ours(r, gated)]
    # The new owner of the call's partition may report it too (adopted or replayed); the brain dedups.
    assert {stdout_of(r) for r in reports} == {"finished\n"}
    assert (harness.work(session_id) / "runs").read_text() == "run\n"


async def _committed(harness: Harness, tp: TopicPartition) -> int:
    consumer = make_consumer(harness.kafka, group_id=harness.group_id)
    await consumer.start()
    try:
        return await consumer.committed(tp) or 0
    finally:
        await consumer.stop()


async def wait_until_async(probe, accept, runner: asyncio.Task, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not accept(value := await probe()):
        if runner.done() or time.monotonic() > deadline:
            pytest.fail(f"gave up waiting; last value {value!r}, runner done={runner.done()}")
        await asyncio.sleep(0.05)
