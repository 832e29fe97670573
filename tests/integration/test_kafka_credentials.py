"""Kafka lets in only who logs in, and lets each principal do only its job (kafka_acls.py).

On a broker of its own (tests/private_broker.py: kafka.sh up with SCRAM users from the
credentials file, then topics and ACLs as `make up` creates them), so nothing here
depends on, or changes, the shared one. Each client logs in as a service's principal with
that principal's generated password; `admin` only reads back what was written.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError, TopicAuthorizationFailedError, TransactionalIdAuthorizationFailed
from aiokafka.structs import TopicPartition

from tests.private_broker import PrivateBroker, first_value_at, private_broker
from wakeline.transport.kafka_io import kafka_auth
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import BRAIN_GROUP, EVENTS, INBOX, TOOL_RESULTS

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateBroker]:
    with private_broker(Path(tmp_path_factory.mktemp("kafka-credentials")) / "kafka") as broker:
        yield broker


def as_principal(broker: PrivateBroker, principal: str) -> CommonSettings:
    return CommonSettings(kafka_bootstrap=broker.bootstrap, kafka_username=principal)


def producer(settings: CommonSettings, **options: object) -> AIOKafkaProducer:
    return AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), acks="all",
                            request_timeout_ms=10_000, **options)


async def send_once(settings: CommonSettings, topic: str) -> None:
    client = producer(settings, enable_idempotence=True)
    try:
        await client.start()
        await client.send_and_wait(topic, b"{}", key=b"credentials-test", partition=0)
    finally:
        await client.stop()


async def test_a_client_without_credentials_cannot_connect_to_produce(broker: PrivateBroker) -> None:
    settings = CommonSettings(kafka_bootstrap=broker.bootstrap, kafka_security_protocol="PLAINTEXT")
    with pytest.raises(KafkaConnectionError):
        await asyncio.wait_for(send_once(settings, EVENTS), 60)


async def test_a_wrong_password_is_refused_as_an_authentication_failure(
        broker: PrivateBroker, caplog: pytest.LogCaptureFixture) -> None:
    settings = CommonSettings(kafka_bootstrap=broker.bootstrap, kafka_username="brain",
                              kafka_password="brain")  # the name as password: what the stack had before
    # aiokafka's bootstrap ends in a KafkaConnectionError; the broker's reason is the one it logs.
    with pytest.raises(KafkaConnectionError):
        await asyncio.wait_for(send_once(settings, EVENTS), 60)
    assert "SaslAuthenticationFailed" in caplog.text and "invalid credentials" in caplog.text, caplog.text


async def test_the_runner_may_not_write_the_event_log(broker: PrivateBroker) -> None:
    with pytest.raises(TopicAuthorizationFailedError):
        await asyncio.wait_for(send_once(as_principal(broker, "runner"), EVENTS), 60)


async def test_the_gateway_may_not_write_tool_results_but_may_write_the_inbox(broker: PrivateBroker) -> None:
    gateway = as_principal(broker, "gateway")
    with pytest.raises(TopicAuthorizationFailedError):
        await asyncio.wait_for(send_once(gateway, TOOL_RESULTS), 60)
    await asyncio.wait_for(send_once(gateway, INBOX), 60)


async def test_the_runner_may_not_take_a_brain_transactional_id(broker: PrivateBroker) -> None:
    client = producer(as_principal(broker, "runner"), transactional_id=f"{BRAIN_GROUP}-p{uuid.uuid4().hex}")
    with pytest.raises(TransactionalIdAuthorizationFailed):
        await asyncio.wait_for(client.start(), 60)
    await client.stop()


async def test_the_brain_writes_the_event_log_in_a_transaction(broker: PrivateBroker) -> None:
    marker = uuid.uuid4().hex.encode()
    client = producer(as_principal(broker, "brain"), transactional_id=f"{BRAIN_GROUP}-p{uuid.uuid4().hex}")
    await asyncio.wait_for(client.start(), 60)
    try:
        async with client.transaction():
            sent = await client.send_and_wait(EVENTS, marker, key=b"credentials-test", partition=0)
    finally:
        await client.stop()
    assert await first_value_at(as_principal(broker, "admin"), TopicPartition(EVENTS, 0), sent.offset) == marker
