"""Keyed records land where the Java client's default partitioner puts them, and survive a restart."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from tests.private_broker import PrivateBroker, private_broker_in_environ
from tests.requirements import require
from wakeline.transport.kafka_io import kafka_auth, make_admin
from wakeline.transport.topic_admin import ensure_topics
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import ALL_TOPICS, INBOX, partition_for

ROOT = Path(__file__).resolve().parents[2]
JAVA_PARTITIONER = """
import org.apache.kafka.common.utils.Utils;
public class Partition {
    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        for (int i = 1; i < args.length; i++) {
            byte[] key = args[i].getBytes(java.nio.charset.StandardCharsets.UTF_8);
            System.out.println(Utils.toPositive(Utils.murmur2(key)) % n);
        }
    }
}
"""


def kafka_clients_jar() -> Path:
    # Where kafka.sh resolves the jars: $WAKELINE_CACHE, else the clone's .cache.
    cache = Path(os.environ.get("WAKELINE_CACHE") or ROOT / ".cache")
    jars = sorted((cache / "kafka-libs").glob("*/kafka-clients-*.jar"))
    require(jars, "kafka-clients jar not resolved; run `make up` (deploy/kafka/kafka.sh resolves it)")
    return jars[-1]


def test_partition_for_agrees_with_the_java_client_on_real_session_ids(tmp_path):
    source = tmp_path / "Partition.java"
    source.write_text(JAVA_PARTITIONER)
    keys = [str(uuid.uuid4()) for _ in range(200)] + ["a", "émoji-✓", "x" * 300]
    n = CommonSettings().partitions
    java = subprocess.run(["java", "-cp", str(kafka_clients_jar().parent / "*"), str(source), str(n), *keys],
                          capture_output=True, text=True, timeout=120)
    assert java.returncode == 0, java.stderr
    assert [int(line) for line in java.stdout.split()] == [partition_for(k, n) for k in keys]


async def test_records_of_one_session_land_in_the_partition_java_picks():
    settings = CommonSettings()
    await ensure_topics(settings)
    sid = str(uuid.uuid4())
    # aiokafka's own default partitioner, not ours: it must agree with partition_for too
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), acks="all")
    await producer.start()
    try:
        metas = [await producer.send_and_wait(INBOX, b"{}", key=sid.encode()) for _ in range(5)]
    finally:
        await producer.stop()
    assert {m.partition for m in metas} == {partition_for(sid, settings.partitions)}


async def test_an_acknowledged_record_survives_a_broker_restart(tmp_path):
    # A broker of its own: restarting the shared one would change it under the tests after this one.
    with private_broker_in_environ(tmp_path / "broker") as broker:
        await _survives_a_restart(broker)


async def _survives_a_restart(broker: PrivateBroker) -> None:
    settings = CommonSettings()
    topic = f"wakeline-test-durable-{uuid.uuid4()}"
    await ensure_topics(settings, (topic,))
    value = uuid.uuid4().bytes
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings),
                                acks="all", enable_idempotence=True)
    await producer.start()
    meta = await producer.send_and_wait(topic, value, key=b"k")
    await producer.stop()
    await asyncio.to_thread(broker.command, "restart")
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings))
    await consumer.start()
    try:
        tp = TopicPartition(topic, meta.partition)
        consumer.assign([tp])
        consumer.seek(tp, meta.offset)
        record = await asyncio.wait_for(consumer.getone(), timeout=60)
    finally:
        await consumer.stop()
    assert record.value == value
    assert {t for t in ALL_TOPICS} <= set(await _topics(settings))


async def _topics(settings: CommonSettings) -> list[str]:
    admin = make_admin(settings)
    await admin.start()
    try:
        return await admin.list_topics()
    finally:
        await admin.close()
