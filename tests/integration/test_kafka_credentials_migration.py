"""A broker whose SCRAM users no longer match the credentials file is brought in line by
`kafka.sh up`, its topics and records kept: the path an old PLAINTEXT data dir takes too
(checked by hand against one made by the pre-credentials kafka.sh; see docs/architecture.md, "Names,
credentials and ACLs").

On a broker and a credentials file of its own. The upsert runs deploy/kafka/ScramUsers.java
from source, so it needs a JDK (deploy/system-deps.sh installs one).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from aiokafka import TopicPartition

from tests.private_broker import environ, first_value_at, private_broker
from tests.requirements import require
from wakeline.transport.kafka_io import make_producer
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import DEAD_LETTER

pytestmark = pytest.mark.kafka


def has_jdk() -> bool:
    modules = subprocess.run(["java", "--list-modules"], capture_output=True, text=True, timeout=60).stdout
    return "jdk.compiler" in modules


async def test_a_changed_admin_password_is_set_on_the_next_up_and_the_log_is_kept(tmp_path: Path) -> None:
    require(has_jdk(), "no JDK (jdk.compiler): kafka.sh cannot run ScramUsers.java; deploy/system-deps.sh installs it")
    credentials = tmp_path / "credentials.env"
    with private_broker(tmp_path / "kafka", credentials) as broker, \
            environ(WAKELINE_CREDENTIALS_FILE=str(credentials), WAKELINE_KAFKA_BOOTSTRAP=broker.bootstrap):
        producer = make_producer(CommonSettings())
        await producer.start()
        try:
            sent = await producer.send_and_wait(DEAD_LETTER, b"before the rotation", key=b"k", partition=0)
        finally:
            await producer.stop()
        broker.command("down")
        text = credentials.read_text()
        credentials.write_text(re.sub(r"(?m)^WAKELINE_KAFKA_PASSWORDS__ADMIN=.*$",
                                      "WAKELINE_KAFKA_PASSWORDS__ADMIN=" + "5e" * 16, text))
        said = broker.command("up")
        assert "other passwords" in said, said
        settings = CommonSettings()
        assert settings.kafka_login() == ("admin", "5e" * 16)
        assert await first_value_at(settings, TopicPartition(DEAD_LETTER, 0), sent.offset) == b"before the rotation"
        assert "setting them" not in broker.command("restart")  # the marker now matches: no second upsert
