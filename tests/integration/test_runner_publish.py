"""The runner's Publisher against the real broker: what Kafka refuses never raises.

A real producer refuses records over its max_request_size; the Publisher must answer
with a small error result instead (or log a lost dead letter), keep its producer usable,
and carry on with the next record.
"""

from __future__ import annotations

import json
import uuid
from functools import partial

import pytest

from runner_harness import Watch
from wakeline.contract.codec import DeadLetter
from wakeline.contract.commands import ToolResultReport
from wakeline.transport.kafka_io import make_producer
from wakeline.contract.topics import DEAD_LETTER, TOOL_RESULTS
from wakeline_runner.publish import Publisher

pytestmark = pytest.mark.kafka


def report(session_id: str, output: str) -> ToolResultReport:
    return ToolResultReport(session_id=session_id, tenant="default", tool_call_id=f"toolu_{uuid.uuid4().hex}",
                            name="bash", output=output, runner=f"test-{uuid.uuid4().hex[:8]}")


@pytest.fixture
async def publisher(kafka):
    publisher = Publisher(partial(make_producer, kafka), kafka.partitions)
    await publisher.start()
    yield publisher
    await publisher.stop()


async def test_a_result_over_the_producers_limit_is_answered_with_a_too_large_error(kafka, publisher) -> None:
    results = Watch(kafka, TOOL_RESULTS, ToolResultReport.model_validate_json)
    await results.start()
    try:
        session_id = str(uuid.uuid4())
        huge, small = report(session_id, "x" * 2_000_000), report(session_id, '{"stdout":"ok"}')
        await publisher.publish_result(huge)
        await publisher.publish_result(small)
        seen = await results.wait_for(lambda r: r.session_id == session_id, count=2)
    finally:
        await results.consumer.stop()
    assert [(r.tool_call_id, r.is_error, r.error_kind) for r in seen] == [
        (huge.tool_call_id, True, "too_large"), (small.tool_call_id, False, None)]
    assert "size" in json.loads(seen[0].output)["message"]


async def test_a_dead_letter_kafka_refuses_is_logged_and_the_next_one_is_sent(kafka, publisher, caplog) -> None:
    letters = Watch(kafka, DEAD_LETTER, DeadLetter.model_validate_json)
    await letters.start()
    key = str(uuid.uuid4())
    letter = partial(DeadLetter, topic="t", partition=0, offset=1, key=key, reason="bad", service="runner")
    try:
        await publisher.dead_letter(letter(value="v" * 2_000_000), "a huge record")
        await publisher.dead_letter(letter(value="small"), "a small record")
        seen = await letters.wait_for(lambda d: d.key == key)
    finally:
        await letters.consumer.stop()
    assert [d.value for d in seen] == ["small"]
    assert "could not dead-letter a huge record" in caplog.text
