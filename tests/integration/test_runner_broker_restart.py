"""A broker restart is weather for the runner: it waits, retries, and carries on by itself.

The broker here is one of its own (`tests.private_broker`, stopped and started with
`deploy/kafka/kafka.sh down` and `up`): restarting the shared broker would change it under
every test that runs after this one. A tool finishes while the broker is down, and the
broker stays down longer than the producer's own retries last: its result must be
published once the broker is back, by the same runner task, and other sessions' calls sent
afterwards must complete.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from runner_harness import GATED, Harness, others_keep_completing, reachable_kafka, stdout_of, wait_until
from tests.private_broker import PrivateBroker, private_broker_in_environ
from wakeline.runtime.settings import CommonSettings

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with private_broker_in_environ(tmp_path_factory.mktemp("broker")) as broker:
        yield broker


@pytest.fixture(scope="module")
async def kafka(broker: PrivateBroker) -> CommonSettings:
    """The harness (and the runner's settings, read from the environment) on the private broker."""
    return await reachable_kafka()


async def test_a_result_finished_while_the_broker_was_down_is_published_after_it_returns(
        harness: Harness, broker: PrivateBroker) -> None:
    session_id = str(uuid.uuid4())
    async with harness.runner_running() as runner:
        request, _ = await harness.call(session_id, GATED)
        await wait_until(lambda: (harness.work(session_id) / "runs").exists(), what="the tool to start")
        await asyncio.to_thread(broker.command, "down")
        try:
            (harness.work(session_id) / "go").touch()
            await wait_until(lambda: harness.work(session_id).joinpath("counter").exists(), 30, "the tool to end")
            # Longer than the producer's request timeout (30 s): its own retries give up, ours go on.
            await asyncio.sleep(40)
            assert not runner.done(), runner.exception() if runner.done() else None
        finally:
            await asyncio.to_thread(broker.command, "up")
        report = await harness.result(request, timeout_s=120)
        assert await others_keep_completing(harness) == 6
        assert not runner.done()
    assert (report.is_error, stdout_of(report)) == (False, "finished\n")
    assert (harness.work(session_id) / "runs").read_text() == "run\n"
