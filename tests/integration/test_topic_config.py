"""ensure_topics on the real broker: new topics get the settings, existing ones are checked.

Each test works on topics under a fresh name, so the wakeline topics are never touched.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from aiokafka.admin import NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from conftest_pg import require_kafka
from wakeline.transport.kafka_io import make_admin
from wakeline.transport.topic_admin import check_topics, ensure_topics
from wakeline.contract.limits import topic_max_message_bytes
from wakeline.runtime.settings import CommonSettings


def fresh_topic() -> str:
    return f"test.topic-config.{uuid.uuid4().hex[:12]}"


async def topic_configs(settings: CommonSettings, topic: str) -> dict[str, str]:
    admin = make_admin(settings)
    await admin.start()
    try:
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic, None)])
        [resource] = response.to_object()["resources"]
        return {e["config_names"]: e["config_value"] for e in resource["config_entries"]}
    finally:
        await admin.close()


async def settled_configs(settings: CommonSettings, topic: str, key: str, value: str, timeout: float = 15) -> dict:
    """A config change reaches the broker through the metadata log: read until it shows."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (configs := await topic_configs(settings, topic))[key] != value and loop.time() < deadline:
        await asyncio.sleep(0.2)
    return configs


async def create_contradicting(settings: CommonSettings, topic: str, **configs: str) -> None:
    admin = make_admin(settings)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, settings.partitions, 1, topic_configs=configs)])
    finally:
        await admin.close()


async def test_a_new_topic_is_created_with_retention_min_isr_and_max_message_size_from_settings():
    settings = CommonSettings(events_retention_ms=-1)
    await require_kafka(settings)
    topic = fresh_topic()
    assert await ensure_topics(settings, (topic,)) == [topic]
    configs = await topic_configs(settings, topic)
    assert configs["retention.ms"] == "-1"
    assert configs["min.insync.replicas"] == str(settings.min_insync_replicas)
    assert configs["max.message.bytes"] == str(topic_max_message_bytes(settings.max_record_bytes))
    assert await check_topics(settings, (topic,)) == []


async def test_an_existing_contradicting_topic_is_reported_and_a_too_small_max_message_size_raised(caplog):
    settings = CommonSettings(events_retention_ms=-1)
    await require_kafka(settings)
    topic = fresh_topic()
    await create_contradicting(settings, topic, **{"retention.ms": "3600000", "max.message.bytes": "200000"})
    with caplog.at_level(logging.WARNING, logger="wakeline.transport.topic_admin"):
        assert await ensure_topics(settings, (topic,)) == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"topic {topic}: retention.ms is 3600000, wanted -1" in w for w in warnings), warnings
    wanted_size = str(topic_max_message_bytes(settings.max_record_bytes))
    assert any(f"topic {topic}: max.message.bytes is 200000, wanted {wanted_size}" in w for w in warnings), warnings
    configs = await settled_configs(settings, topic, "max.message.bytes", wanted_size)
    # raised, and the legacy AlterConfigs did not reset the retention the operator set
    assert configs["max.message.bytes"] == wanted_size
    assert configs["retention.ms"] == "3600000"
    assert [m.key for m in await check_topics(settings, (topic,))] == ["retention.ms"]


async def test_fix_sets_retention_and_min_isr_of_an_existing_topic():
    settings = CommonSettings(events_retention_ms=-1)
    await require_kafka(settings)
    topic = fresh_topic()
    await create_contradicting(settings, topic, **{"retention.ms": "3600000"})
    await ensure_topics(settings, (topic,), fix=True)
    assert (await settled_configs(settings, topic, "retention.ms", "-1"))["retention.ms"] == "-1"
    assert await check_topics(settings, (topic,)) == []


async def test_a_replication_factor_below_the_setting_is_reported_not_changed(caplog):
    local = CommonSettings()
    await require_kafka(local)
    topic = fresh_topic()
    await ensure_topics(local, (topic,))
    cluster = CommonSettings(replication_factor=3)
    with caplog.at_level(logging.WARNING, logger="wakeline.transport.topic_admin"):
        await ensure_topics(cluster, (topic,), fix=True)
    assert any(f"topic {topic}: replication.factor is 1, wanted 3" in r.getMessage() for r in caplog.records)
    assert [(m.key, m.found) for m in await check_topics(cluster, (topic,))] == [("replication.factor", "1")]


async def test_a_topic_the_broker_refuses_to_create_is_an_error_not_reported_as_created():
    local = CommonSettings()
    await require_kafka(local)
    topic = fresh_topic()
    with pytest.raises(RuntimeError, match=f"refused to create topics: .*{topic}"):
        await ensure_topics(CommonSettings(replication_factor=100), (topic,))  # more than any test cluster has
