"""The Kafka witness: the topic `<prefix>.checkpoints`, one partition, kept forever, keyed by tenant."""

from __future__ import annotations

import asyncio

from aiokafka import TopicPartition
from aiokafka.admin import NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError

from wakeline.evidence.cross_check import Problem
from wakeline.evidence.signed_checkpoints import Envelope
from wakeline.transport.kafka_io import make_admin, make_consumer, make_producer
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import CHECKPOINTS

# Kept forever and never compacted: a compacted topic keeps only a key's last record,
# which would let a newer checkpoint erase the older ones it must sit beside.
TOPIC_CONFIG = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}


async def ensure_topic(settings: CommonSettings) -> bool:
    """Creates `<prefix>.checkpoints` (one partition: one order to read); True if created.

    An existing topic whose retention or cleanup policy differs is an error: it would
    delete or compact evidence.
    """
    admin = make_admin(settings)
    await admin.start()
    try:
        try:
            response = await admin.create_topics([NewTopic(CHECKPOINTS, 1, settings.replication_factor, topic_configs={
                **TOPIC_CONFIG, "min.insync.replicas": str(settings.min_insync_replicas)})])
        except TopicAlreadyExistsError:
            response = None
        # The broker answers per topic: 0 created, 36 already there, anything else refused.
        codes = [e["error_code"] for e in (response.to_object()["topic_errors"] if response is not None else [])]
        refused = [c for c in codes if c not in (0, TopicAlreadyExistsError.errno)]
        if refused:
            raise RuntimeError(f"the broker refused to create {CHECKPOINTS}: error code {refused[0]}")
        if codes == [0]:
            return True  # created just now, with TOPIC_CONFIG
        # A topic created a moment ago (by another process) may describe with no entries yet.
        for _ in range(20):
            described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, CHECKPOINTS, None)])
            entries = {e["config_names"]: e["config_value"] for resp in described
                       for r in resp.to_object()["resources"] for e in r["config_entries"]}
            if entries:
                break
            await asyncio.sleep(0.25)
        wrong = {k: entries.get(k) for k, v in TOPIC_CONFIG.items() if entries.get(k) != v}
        if wrong:
            raise RuntimeError(f"topic {CHECKPOINTS} has {wrong}, wanted {TOPIC_CONFIG}: it would lose checkpoints")
        return False
    finally:
        await admin.close()


async def publish(settings: CommonSettings, envelope: Envelope) -> None:
    producer = make_producer(settings)
    await producer.start()
    try:
        await producer.send_and_wait(CHECKPOINTS, envelope.model_dump_json().encode(),
                                     key=envelope.parsed().tenant.encode(), partition=0)
    finally:
        await producer.stop()


async def read_topic(settings: CommonSettings, tenant: str) -> tuple[list[Envelope], list[Problem]]:
    """Every record of `tenant` on the topic, from its first offset to its end now."""
    partition = TopicPartition(CHECKPOINTS, 0)
    consumer = make_consumer(settings, group_id=None, enable_auto_commit=False)
    await consumer.start()
    found: list[Envelope] = []
    problems: list[Problem] = []
    try:
        consumer.assign([partition])
        end = (await consumer.end_offsets([partition]))[partition]
        await consumer.seek_to_beginning(partition)
        while await consumer.position(partition) < end:
            batch = await consumer.getmany(partition, timeout_ms=1000)
            for record in batch.get(partition, []):
                if record.key != tenant.encode():
                    continue
                try:
                    found.append(Envelope.model_validate_json(record.value))
                except ValueError:
                    problems.append(Problem(checkpoint=None,
                                            reason=f"the topic {CHECKPOINTS}, offset {record.offset}: "
                                                   "not a signed checkpoint"))
    finally:
        await consumer.stop()
    return found, problems
