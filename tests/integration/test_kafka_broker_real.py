"""The Kafka the settings name (WAKELINE_KAFKA_BOOTSTRAP) is a real Apache Kafka broker.

Asks the broker itself, through kcat (librdkafka, independent of the Python
client under test), for cluster metadata: broker id 1 must answer, and topics
created through aiokafka's admin client must be listed by it.

Start the broker first: `bash deploy/kafka/kafka.sh up`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid

import pytest
from aiokafka.admin import NewTopic

from tests.kcat import kcat_login
from tests.requirements import require
from wakeline.transport.kafka_io import make_admin
from wakeline.runtime.settings import CommonSettings

pytestmark = pytest.mark.kafka

BOOTSTRAP = CommonSettings().kafka_bootstrap.split(",")[0]

_TOPIC_LINE = re.compile(r'^\s*topic "(?P<name>[^"]+)" with (?P<partitions>\d+) partitions', re.M)
_BROKER_LINE = re.compile(r"^\s*broker (?P<id>\d+) at (?P<addr>\S+)", re.M)


def _kcat() -> str:
    path = shutil.which("kcat")
    require(path, "kcat not found on PATH (apt-get install kcat)")
    return path


def kcat_metadata() -> str:
    """Raw `kcat -L` output from the broker, or a test failure naming the broker."""
    proc = subprocess.run(
        [_kcat(), "-b", BOOTSTRAP, *kcat_login(), "-L", "-m", "10"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"kcat -L against {BOOTSTRAP} failed (exit {proc.returncode}); "
            f"is the broker up? (bash deploy/kafka/kafka.sh up)\n{proc.stderr[-2000:]}"
        )
    return proc.stdout


def listed_topics(metadata: str) -> dict[str, int]:
    """topic name -> partition count, as kcat -L lists them."""
    return {m["name"]: int(m["partitions"]) for m in _TOPIC_LINE.finditer(metadata)}


def assert_topics_listed(expected: list[str], timeout_s: float = 10.0) -> dict[str, int]:
    """Poll kcat until every expected topic is listed (metadata propagates quickly, not instantly)."""
    deadline = time.monotonic() + timeout_s
    while True:
        topics = listed_topics(kcat_metadata())
        missing = [t for t in expected if t not in topics]
        if not missing:
            return topics
        if time.monotonic() > deadline:
            pytest.fail(f"kcat -L does not list {missing}; it lists {sorted(topics)}")
        time.sleep(0.5)


def test_broker_1_answers_metadata() -> None:
    metadata = kcat_metadata()
    brokers = {int(m["id"]): m["addr"] for m in _BROKER_LINE.finditer(metadata)}
    assert brokers.get(1) == BOOTSTRAP, f"broker 1 at {BOOTSTRAP} not in kcat -L output:\n{metadata}"
    assert f"(from broker 1: sasl_plaintext://{BOOTSTRAP}/1)" in metadata  # it answered on the SASL listener


async def test_topic_created_via_aiokafka_admin_is_listed_by_kcat() -> None:
    topic = f"wakeline-test-broker-real-{uuid.uuid4().hex}"
    admin = make_admin(CommonSettings(kafka_bootstrap=BOOTSTRAP), request_timeout_ms=15000)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(topic, num_partitions=2, replication_factor=1)], timeout_ms=15000
        )
        errors = [(name, code, msg) for name, code, msg, *_ in response.topic_errors if code != 0]
        assert not errors, f"CreateTopics failed: {errors}"

        topics = assert_topics_listed([topic])
        assert topics[topic] == 2
    finally:
        try:
            await admin.delete_topics([topic], timeout_ms=15000)
        finally:
            await admin.close()


def test_kcat_lists_every_wakeline_topic_with_the_configured_partition_count() -> None:
    from wakeline.runtime.settings import CommonSettings
    from wakeline.contract.topics import ALL_TOPICS

    topics = assert_topics_listed(list(ALL_TOPICS))
    assert {t: topics[t] for t in ALL_TOPICS} == {t: CommonSettings().partitions for t in ALL_TOPICS}
