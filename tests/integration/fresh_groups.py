"""Consumer groups of a test's own, started at the current end of their topics.

A service run in-process under the suite's default group would take up whatever earlier
tests left behind under that group (the e2e tests run their services under the defaults):
stale sessions' inbox records, tool calls a killed runner never committed, members still
in the group. A fresh group sees only what its test sends; a fresh group with no committed
offsets would start at the earliest record, so its offsets are committed at the end first.
"""

from __future__ import annotations

from aiokafka import TopicPartition

from wakeline.transport.kafka_io import make_consumer
from wakeline.runtime.settings import CommonSettings


async def commit_group_at_end(settings: CommonSettings, group_id: str, *topics: str) -> None:
    consumer = make_consumer(settings, group_id=group_id)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for topic in topics for p in range(settings.partitions)]
        consumer.assign(partitions)
        await consumer.seek_to_end(*partitions)
        await consumer.commit({tp: await consumer.position(tp) for tp in partitions})
    finally:
        await consumer.stop()
