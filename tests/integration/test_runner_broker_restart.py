"""A broker restart is weather for the runner: it waits, retries, and carries on by itself.

This test restarts the broker the tests use (`deploy/kafka/kafka.sh down`, then `up`),
so it runs against the local broker that script manages; point WAKELINE_KAFKA_* at a
broker of your own when others share the default one. A tool finishes while the broker
is down, and the broker stays down longer than the producer's own retries last: its
result must be published once the broker is back, by the same runner task, and other
sessions' calls sent afterwards must complete.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from pathlib import Path

import pytest

from runner_harness import GATED, Harness, others_keep_completing, stdout_of, wait_until

pytestmark = pytest.mark.kafka
KAFKA_SH = Path(__file__).resolve().parents[2] / "deploy" / "kafka" / "kafka.sh"


def broker(command: str) -> None:
    done = subprocess.run(["bash", str(KAFKA_SH), command], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr


async def test_a_result_finished_while_the_broker_was_down_is_published_after_it_returns(harness: Harness) -> None:
    session_id = str(uuid.uuid4())
    async with harness.runner_running() as runner:
        request, _ = await harness.call(session_id, GATED)
        await wait_until(lambda: (harness.work(session_id) / "runs").exists(), what="the tool to start")
        await asyncio.to_thread(broker, "down")
        try:
            (harness.work(session_id) / "go").touch()
            await wait_until(lambda: harness.work(session_id).joinpath("counter").exists(), 30, "the tool to end")
            # Longer than the producer's request timeout (30 s): its own retries give up, ours go on.
            await asyncio.sleep(40)
            assert not runner.done(), runner.exception() if runner.done() else None
        finally:
            await asyncio.to_thread(broker, "up")
        report = await harness.result(request, timeout_s=120)
        assert await others_keep_completing(harness) == 6
        assert not runner.done()
    assert (report.is_error, stdout_of(report)) == (False, "finished\n")
    assert (harness.work(session_id) / "runs").read_text() == "run\n"
