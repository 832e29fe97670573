"""Kafka clients configured the way every Wakeline service needs them.

Producers: acks=all and idempotent, so an acknowledged record is on the log exactly once
per send. Consumers: manual commits only, so an offset moves after the effect is durable.
Records are placed by `topics.partition_for`, never by a client's own partitioner.
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from pydantic import BaseModel

from wakeline.codec import encode
from wakeline.limits import producer_max_request_size
from wakeline.settings import CommonSettings
from wakeline.topics import ALL_TOPICS, partition_for, record_key


def make_producer(settings: CommonSettings, **overrides) -> AIOKafkaProducer:
    options = dict(bootstrap_servers=settings.kafka_bootstrap, acks="all",
                   enable_idempotence=True, linger_ms=2, request_timeout_ms=30_000,
                   max_request_size=producer_max_request_size(settings.max_record_bytes))
    options.update(overrides)
    return AIOKafkaProducer(**options)


def make_consumer(settings: CommonSettings, *topics: str, group_id: str | None, **overrides) -> AIOKafkaConsumer:
    options = dict(bootstrap_servers=settings.kafka_bootstrap, group_id=group_id,
                   enable_auto_commit=False, auto_offset_reset="earliest",
                   isolation_level="read_committed", session_timeout_ms=10_000,
                   heartbeat_interval_ms=1_000, max_poll_interval_ms=300_000)
    options.update(overrides)
    return AIOKafkaConsumer(*topics, **options)


async def send_keyed(producer: AIOKafkaProducer, topic: str, session_id: str, model: BaseModel,
                     partitions: int):
    """Sends one record keyed by session id to the session's partition; waits for the ack."""
    return await producer.send_and_wait(topic, encode(model), key=record_key(session_id),
                                        partition=partition_for(session_id, partitions))


async def ensure_topics(settings: CommonSettings, topics: tuple[str, ...] = ALL_TOPICS) -> list[str]:
    """Creates missing wakeline topics with the configured partition count; returns those created.

    An existing topic with another partition count is an error: it would split a
    session's records across brains.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        existing = await _partition_counts(admin, topics)
        wrong = {t: n for t, n in existing.items() if n != settings.partitions}
        if wrong:
            raise RuntimeError(f"topics exist with a partition count other than {settings.partitions}: {wrong}")
        missing = [t for t in topics if t not in existing]
        if missing:
            try:
                await admin.create_topics([NewTopic(t, settings.partitions, 1) for t in missing])
            except TopicAlreadyExistsError:
                pass  # another process created them between our look and our create
        return missing
    finally:
        await admin.close()


async def _partition_counts(admin: AIOKafkaAdminClient, topics: tuple[str, ...]) -> dict[str, int]:
    described = await admin.describe_topics(list(topics))
    return {d["topic"]: len(d["partitions"]) for d in described if d.get("error_code", 0) == 0}
