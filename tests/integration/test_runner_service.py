"""The runner service against the real Kafka broker: results, replays, isolation, dead letters.

Each test starts its own runner in-process (a fresh consumer group, positioned at the
current end of `wakeline.tool-calls`, and its own sandbox root), uses fresh session ids,
and reads `wakeline.tool-results` filtered by those ids and by its runners' host names
(a runner of another group on the same broker also answers our calls). Start the broker first:
`bash deploy/kafka/kafka.sh up`. With CI=true an unreachable broker fails the tests.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
import json
import random
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiokafka import TopicPartition

from tests.requirements import missing
from wakeline.codec import DeadLetter
from wakeline.commands import ToolCallRequest, ToolResultReport
from wakeline.kafka_io import ensure_topics, make_consumer, make_producer, send_keyed
from wakeline.settings import CommonSettings
from wakeline.topics import DEAD_LETTER, TOOL_CALLS, TOOL_RESULTS, partition_for, record_key
from wakeline_runner.app import run
from wakeline_runner.settings import RunnerSettings

from test_runner_adoption import processes_with, wait_until

pytestmark = pytest.mark.kafka
GATED = 'echo run >> runs; while [ ! -e go ]; do sleep 0.05; done; echo line >> counter; echo finished'


@pytest.fixture(scope="module")
async def kafka() -> CommonSettings:
    settings = CommonSettings()
    try:
        await asyncio.wait_for(ensure_topics(settings), 30)
    except Exception as err:  # noqa: BLE001 - any failure here means "no broker"
        message = (f"Kafka at {settings.kafka_bootstrap} is unreachable ({err!r}); "
                   "start it with `bash deploy/kafka/kafka.sh up`")
        missing(message)
    return settings


class Watch:
    """Reads a topic from its current end, keeping every decoded record it has seen."""

    def __init__(self, settings: CommonSettings, topic: str, parse):
        self.consumer = make_consumer(settings, group_id=None)
        self.partitions = [TopicPartition(topic, p) for p in range(settings.partitions)]
        self.parse, self.seen = parse, []

    async def start(self) -> None:
        await self.consumer.start()
        self.consumer.assign(self.partitions)
        await self.consumer.seek_to_end(*self.partitions)
        for tp in self.partitions:
            await self.consumer.position(tp)  # pin "the end" before anything is produced

    async def wait_for(self, match, count: int = 1, timeout_s: float = 60.0, runners: tuple = ()):
        deadline = time.monotonic() + timeout_s
        while len(hits := [item for item in self.seen if match(item)]) < count:
            for runner in runners:
                if runner.done():
                    pytest.fail(f"a runner stopped: {runner.exception()!r}")
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout_s}s; saw {len(hits)} of {count} matching records")
            for records in (await self.consumer.getmany(timeout_ms=100)).values():
                self.seen.extend(self.parse(r.value) for r in records)
        return hits


class Harness:
    def __init__(self, kafka: CommonSettings, tmp_path: Path):
        self.kafka, self.tmp_path = kafka, tmp_path
        self.group_id = f"test-runner-{uuid.uuid4().hex}"
        self.producer = make_producer(kafka)
        self.results = Watch(kafka, TOOL_RESULTS, ToolResultReport.model_validate_json)
        self.runners: list[asyncio.Task] = []
        self.hosts: set[str] = set()

    def settings(self, **overrides) -> RunnerSettings:
        return RunnerSettings(sandbox_root=self.tmp_path / "sandboxes", group_id=self.group_id, **overrides)

    async def start(self) -> None:
        await self.producer.start()
        await self.results.start()
        await _commit_group_at_end(self.settings())

    @asynccontextmanager
    async def runner_running(self, **overrides):
        overrides.setdefault("host", f"test-{uuid.uuid4().hex[:12]}")
        self.hosts.add(overrides["host"])
        stop = asyncio.Event()
        runner = asyncio.create_task(run(self.settings(**overrides), stop))
        self.runners.append(runner)
        try:
            yield runner
        finally:
            stop.set()
            self.runners.remove(runner)
            await asyncio.wait_for(runner, 30)

    async def call(self, session_id: str, command: str, call_id: str | None = None, timeout_s: float = 30.0):
        request = ToolCallRequest(session_id=session_id, tenant="default",
                                  tool_call_id=call_id or f"toolu_{uuid.uuid4().hex}", name="bash",
                                  input={"command": command}, timeout_s=timeout_s, causation_seq=1,
                                  # so that a later run's runners answer these leftovers `expired`
                                  issued_at=datetime.now(timezone.utc))
        sent = await send_keyed(self.producer, TOOL_CALLS, session_id, request, self.kafka.partitions)
        return request, sent

    async def result(self, request: ToolCallRequest, count: int = 1, timeout_s: float = 60.0):
        hits = await self.results.wait_for(lambda r: self.ours(r, request), count, timeout_s, tuple(self.runners))
        return hits[-1]

    def ours(self, report: ToolResultReport, request: ToolCallRequest) -> bool:
        return (report.session_id, report.tool_call_id) == (request.session_id, request.tool_call_id) \
            and report.runner in self.hosts

    def work(self, session_id: str) -> Path:
        return self.tmp_path / "sandboxes" / "default" / session_id / "work"

    async def close(self) -> None:
        await self.results.consumer.stop()
        await self.producer.stop()


async def _commit_group_at_end(settings: RunnerSettings) -> None:
    """A fresh group would start at the earliest record; start it at the end instead."""
    consumer = make_consumer(settings, group_id=settings.group_id)
    await consumer.start()
    try:
        partitions = [TopicPartition(TOOL_CALLS, p) for p in range(settings.partitions)]
        consumer.assign(partitions)
        await consumer.seek_to_end(*partitions)
        await consumer.commit({tp: await consumer.position(tp) for tp in partitions})
    finally:
        await consumer.stop()


@pytest.fixture
async def harness(kafka: CommonSettings, tmp_path: Path):
    harness = Harness(kafka, tmp_path)
    await harness.start()
    yield harness
    await harness.close()


def stdout_of(report: ToolResultReport) -> str:
    return json.loads(report.output)["stdout"]


async def test_a_bash_call_produces_a_result(harness: Harness) -> None:
    async with harness.runner_running(host="test-runner-one"):
        request, _ = await harness.call(str(uuid.uuid4()), "echo hello; pwd")
        report = await harness.result(request)
    assert (report.is_error, report.replayed, report.name) == (False, False, "bash")
    assert stdout_of(report) == f"hello\n{harness.work(request.session_id)}\n"
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
    assert names <= {"PATH", "HOME", "LANG", "TERM", "PWD", "SHLVL", "_", "OLDPWD"}


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


def session_on(partition: int, partitions: int) -> str:
    """A fresh session id that lands on `partition`."""
    while partition_for(session_id := str(uuid.uuid4()), partitions) != partition:
        pass
    return session_id


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
