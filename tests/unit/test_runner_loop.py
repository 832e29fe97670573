"""`ToolCallLoop` between a `FakeConsumer` and a `Publisher` over a `FakeProducer`, with the
real executor on a temporary sandbox (file tools only: they run in-process).

The runner does not use Kafka transactions: a result is acknowledged by the broker and
only then may the offset of its call be committed. Real Kafka is covered in
tests/integration/test_runner_service.py and the broker restart in test_runner_broker_restart.py.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

from aiokafka.structs import TopicPartition

from tests.fakes.kafka import FakeConsumer, FakeProducer, consumer_record
from wakeline.contract.codec import DeadLetter, decode
from wakeline.contract.commands import ToolCallRequest, ToolResultReport
from wakeline.contract.topics import DEAD_LETTER, TOOL_CALLS, TOOL_RESULTS, partition_for, record_key
from wakeline_runner.executor import Executor
from wakeline_runner.isolation import Isolation
from wakeline_runner.loop import ToolCallLoop
from wakeline_runner.publish import Publisher
from wakeline_runner.sandbox import Sandbox
from wakeline_runner.session_dirs import session_dir
from wakeline_runner.settings import RunnerSettings

TP = TopicPartition(TOOL_CALLS, 2)


class Runner:
    def __init__(self, sandbox_root: Path):
        self.settings = RunnerSettings(sandbox_root=sandbox_root, use_bwrap="off", host="runner-test",
                                       partitions=6)
        isolation = Isolation(False, None, self.settings.tmp_bytes, "unit test: file tools only")
        self.journal: list = []
        self.consumer, self.producer = FakeConsumer(self.journal), FakeProducer(self.journal)
        self.loop = ToolCallLoop(self.settings, self.consumer, Publisher(lambda: self.producer, 6),
                                 Executor(self.settings, Sandbox(self.settings, isolation)))

    async def run_until_committed(self, offset: int) -> None:
        stop = asyncio.Event()
        await self.loop.publisher.start()
        task = asyncio.create_task(self.loop.run(stop))
        try:
            deadline = asyncio.get_running_loop().time() + 5
            while self.consumer.committed_offset(TP) != offset:
                assert asyncio.get_running_loop().time() < deadline, f"offset {offset} not committed in time"
                await asyncio.sleep(0.02)
        finally:
            stop.set()
            await asyncio.wait_for(task, 5)
            await self.loop.publisher.stop()

    def results(self) -> list[ToolResultReport]:
        return [decode(s.value, ToolResultReport.model_validate_json)
                for s in self.producer.acked if s.topic == TOOL_RESULTS]


def call_record(offset: int, tool_call_id: str, name: str, tool_input: dict, session_id: str = "s1"):
    request = ToolCallRequest(session_id=session_id, tenant="t", tool_call_id=tool_call_id, name=name,
                              input=tool_input, causation_seq=4, issued_at=datetime.now(UTC))
    return consumer_record(TP.topic, TP.partition, offset, record_key(session_id),
                           request.model_dump_json().encode())


async def test_a_tool_call_is_run_once_and_its_result_acked_before_its_offset_is_committed(tmp_path):
    runner = Runner(tmp_path)
    runner.consumer.feed(call_record(0, "tc-1", "write_file", {"path": "notes.txt", "content": "hello"}))
    await runner.run_until_committed(1)
    [result] = runner.results()
    assert (result.session_id, result.tool_call_id, result.is_error, result.replayed) == ("s1", "tc-1", False, False)
    assert json.loads(result.output)["bytes_written"] == 5
    assert (session_dir(tmp_path, "t", "s1") / "work" / "notes.txt").read_text() == "hello"
    [sent] = runner.producer.acked
    assert (sent.key, sent.partition) == (b"s1", partition_for("s1", 6))
    acked_at = runner.journal.index(("acked", sent))
    passed_at = next(i for i, (kind, what) in enumerate(runner.journal) if kind == "commit_offsets" and what[TP] > 0)
    assert acked_at < passed_at and runner.journal[passed_at][1] == {TP: 1}
    assert runner.consumer.subscribed == [TOOL_CALLS]


async def test_a_redelivered_call_is_answered_from_its_record_and_not_run_again(tmp_path):
    runner = Runner(tmp_path)
    work = session_dir(tmp_path, "t", "s1") / "work"
    first = call_record(0, "tc-1", "write_file", {"path": "log.txt", "content": "once"})
    runner.consumer.feed(first)
    await runner.run_until_committed(1)
    (work / "log.txt").write_text("changed since")  # a second run would overwrite this
    again = Runner(tmp_path)  # a new runner gets the same call again, as after a crash before the commit
    again.consumer.feed(consumer_record(TP.topic, TP.partition, 1, first.key, first.value))
    await again.run_until_committed(2)
    [original], [replay] = runner.results(), again.results()
    assert replay.replayed and not original.replayed
    assert replay.output == original.output and replay.tool_call_id == "tc-1"
    assert (work / "log.txt").read_text() == "changed since"


async def test_a_malformed_call_is_dead_lettered_and_the_next_one_still_runs(tmp_path):
    runner = Runner(tmp_path)
    runner.consumer.feed(consumer_record(TP.topic, TP.partition, 0, b"s1", b"{not json"),
                         call_record(1, "tc-2", "list_files", {}))
    await runner.run_until_committed(2)
    [letter] = [decode(s.value, DeadLetter.model_validate_json) for s in runner.producer.acked
                if s.topic == DEAD_LETTER]
    assert (letter.topic, letter.partition, letter.offset) == (TOOL_CALLS, 2, 0)
    assert [(r.tool_call_id, r.is_error) for r in runner.results()] == [("tc-2", False)]


class SlowFirst:
    """The executor, with the first call it runs held for `hold_s` (a long tool)."""

    def __init__(self, executor: Executor, hold_s: float):
        self._executor, self._hold_s = executor, hold_s
        self.started: list[tuple[str, float]] = []

    def __getattr__(self, name: str):
        return getattr(self._executor, name)

    async def execute(self, request: ToolCallRequest) -> ToolResultReport:
        self.started.append((request.tool_call_id, asyncio.get_running_loop().time()))
        if len(self.started) == 1:
            await asyncio.sleep(self._hold_s)
        return await self._executor.execute(request)


async def test_a_call_waiting_at_its_tenants_quota_runs_after_the_one_ahead_and_does_not_expire(tmp_path):
    runner = Runner(tmp_path)
    runner.settings = runner.settings.model_copy(update={"stale_after_s": 0.2})
    executor = Executor(runner.settings, runner.loop.executor.sandbox)
    runner.loop.executor = slow = SlowFirst(executor, hold_s=0.5)
    records = []
    for offset, (call_id, sid) in enumerate((("tc-1", "s1"), ("tc-2", "s2"))):  # two sessions of tenant t
        request = ToolCallRequest(session_id=sid, tenant="t", tool_call_id=call_id, name="list_files", input={},
                                  causation_seq=4, issued_at=datetime.now(UTC), tenant_calls_in_flight=1)
        records.append(consumer_record(TP.topic, TP.partition, offset, record_key(sid),
                                       request.model_dump_json().encode()))
    runner.consumer.feed(*records)
    await runner.run_until_committed(2)
    (first, at_first), (second, at_second) = slow.started
    assert (first, second) == ("tc-1", "tc-2") and at_second - at_first >= 0.45  # held apart by the quota
    results = {r.tool_call_id: r for r in runner.results()}
    assert not results["tc-2"].is_error, results["tc-2"]  # waited 0.5 s, past stale_after_s: still ran


async def test_offsets_are_committed_at_most_every_commit_every_s_and_all_of_them_at_stop(tmp_path):
    runner = Runner(tmp_path)
    runner.settings = runner.settings.model_copy(update={"commit_every_s": 30.0})
    runner.loop.settings = runner.settings
    runner.consumer.feed(*(call_record(offset, f"call-{offset}", "list_files", {"path": "."}) for offset in range(3)))
    stop = asyncio.Event()
    await runner.loop.publisher.start()
    task = asyncio.create_task(runner.loop.run(stop))
    try:
        deadline = asyncio.get_running_loop().time() + 5
        while len(runner.results()) < 3:
            assert asyncio.get_running_loop().time() < deadline, "the three calls did not finish in time"
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)  # many rounds of the fetch loop
        # The first round's commit, if any, came before the calls finished; the next is 30 s away.
        assert (runner.consumer.committed_offset(TP) or 0) < 3, runner.consumer.commits
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
        await runner.loop.publisher.stop()
    assert runner.consumer.committed_offset(TP) == 3  # the stop commits what finished
