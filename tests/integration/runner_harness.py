"""Shared harness for the runner's integration tests; it holds no tests itself.

A `Harness` runs runners in-process, each under a fresh consumer group positioned at the
current end of `wakeline.tool-calls` and its own sandbox root, and reads
`wakeline.tool-results` filtered by its sessions and its runners' host names (a runner of
another group on the same broker also answers our calls). The `kafka` and `harness`
fixtures built from it are in this directory's conftest.py. `GATED` tools wait on a gate
file the test creates, so nothing depends on timing.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path

import pytest
from aiokafka import TopicPartition

from tests.integration.fresh_groups import commit_group_at_end
from tests.private_broker import held_partitions
from tests.requirements import missing
from wakeline.contract.commands import ToolCallRequest, ToolResultReport
from wakeline.transport.kafka_io import make_consumer, make_producer, send_keyed
from wakeline.transport.topic_admin import ensure_topics
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import TOOL_CALLS, TOOL_RESULTS, partition_for
from wakeline_runner import cgroups
from wakeline_runner.app import run
from wakeline_runner.session_dirs import session_dir
from wakeline_runner.settings import RunnerSettings

GATED = 'echo run >> runs; while [ ! -e go ]; do sleep 0.05; done; echo line >> counter; echo finished'
# Where the tests run as root, calls get the per-session control groups the runner uses.
GROUPS, _ = cgroups.detect("wakeline-test", 512, 2 * 1024**3)
# The sandbox-level tests run each case with bubblewrap and without.
BWRAP_MODES = {"params": ["on", "off"], "ids": ["bwrap", "no-bwrap"]}


def sandbox_settings(tmp_path: Path, use_bwrap: str) -> RunnerSettings:
    return RunnerSettings(sandbox_root=tmp_path / "sandboxes", use_bwrap=use_bwrap)


async def wait_until(condition, timeout_s: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(0.02)
    return result


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line contains `marker` (zombies have none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


async def reachable_kafka() -> CommonSettings:
    """The broker's settings once its topics exist; skips (fails under CI) when it is unreachable."""
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
        self.settings = settings
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
                held = await held_partitions(self.settings.kafka_bootstrap, self.settings.partitions)
                pytest.fail(f"timed out after {timeout_s}s; saw {len(hits)} of {count} matching records; {held}")
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
        await commit_group_at_end(self.kafka, self.group_id, TOOL_CALLS)

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

    async def call(self, session_id: str, command: str, call_id: str | None = None, timeout_s: float = 30.0,
                   name: str = "bash", tool_input: dict | None = None, tenant: str = "default"):
        request = ToolCallRequest(session_id=session_id, tenant=tenant,
                                  tool_call_id=call_id or f"toolu_{uuid.uuid4().hex}", name=name,
                                  input={"command": command} if tool_input is None else tool_input,
                                  timeout_s=timeout_s, causation_seq=1,
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

    def work(self, session_id: str, tenant: str = "default") -> Path:
        """A session's work dir on the host (its tools see it at /work)."""
        return session_dir(self.tmp_path / "sandboxes", tenant, session_id) / "work"

    async def close(self) -> None:
        await self.results.consumer.stop()
        await self.producer.stop()


def stdout_of(report: ToolResultReport) -> str:
    return json.loads(report.output)["stdout"]


def session_on(partition: int, partitions: int) -> str:
    """A fresh session id that lands on `partition`."""
    while partition_for(session_id := str(uuid.uuid4()), partitions) != partition:
        pass
    return session_id


async def others_keep_completing(harness: Harness, count: int = 6) -> int:
    """Sends `count` calls of fresh sessions, one per partition in turn; returns how many succeeded."""
    partitions = harness.kafka.partitions
    sessions = [session_on(i % partitions, partitions) for i in range(count)]
    requests = [(await harness.call(sid, f"echo other-{i}"))[0] for i, sid in enumerate(sessions)]
    reports = [await harness.result(request) for request in requests]
    return sum(not r.is_error and stdout_of(r) == f"other-{i}\n" for i, r in enumerate(reports))
