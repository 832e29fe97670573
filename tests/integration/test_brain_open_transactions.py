"""`OpenTransactions` on the real broker: a transaction left open on a partition is seen until
its commit marker lands, and only on that partition. The brain waits on it before a taken
partition goes live (tests/unit/test_brain_partition_settle.py)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka.admin import NewTopic

from runner_harness import reachable_kafka
from wakeline.transport.kafka_io import make_admin, make_producer
from wakeline_brain.open_transactions import OpenTransactions

pytestmark = pytest.mark.kafka


async def test_an_open_transaction_is_seen_until_it_commits_and_only_on_its_partition() -> None:
    settings = await reachable_kafka()
    topic = f"test-open-txn-{uuid.uuid4().hex[:12]}"
    admin = make_admin(settings)
    await admin.start()
    await admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    producer = make_producer(settings, transactional_id=f"test-open-txn-{uuid.uuid4().hex}")
    gauge = OpenTransactions(settings, (topic,))
    await producer.start()
    await gauge.start()
    try:
        assert await gauge(0) == [] and await gauge(1) == []
        await producer.begin_transaction()
        await (await producer.send(topic, b"pending", key=b"k", partition=0))
        [still] = await gauge(0)
        assert str(still) == f"{topic}[0]: read-committed end 0 < log end 1"
        assert await gauge(1) == []
        await producer.commit_transaction()
        # The commit returns once the coordinator has logged it; the partition's marker is
        # written after that (the very gap the brain waits out), within milliseconds.
        for _ in range(250):
            if await gauge(0) == []:
                break
            await asyncio.sleep(0.02)
        assert await gauge(0) == []
    finally:
        await gauge.stop()
        await producer.stop()
        await admin.delete_topics([topic])
        await admin.close()
