"""Kafka clients configured the way every Wakeline service needs them.

Producers: acks=all and idempotent, so an acknowledged record is on the log exactly once
per send. Consumers: manual commits only, so an offset moves after the effect is durable.
Records are placed by `topics.partition_for`, never by a client's own partitioner.
Every client logs in the one way `kafka_auth` says (SASL as the settings' principal);
anything that builds an aiokafka client of its own passes `**kafka_auth(settings)`.
Creating the topics and checking their configuration is topic_admin.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.client import AIOKafkaClient
from pydantic import BaseModel

from wakeline.runtime import tracing
from wakeline.contract.codec import encode
from wakeline.contract.limits import producer_max_request_size
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import partition_for, record_key

# Consumers that read a range already known to be committed (a wake's tail, the archive's
# lag) never need a fetch to wait for records to arrive: a long poll would only hold the
# connection, on which Kafka answers requests in order, in front of the next offset
# look-up. And a fetch of nothing but markers or aborted records moves the position yet
# hands back no record, so `getmany` would wait out its whole timeout: they poll briefly
# and look at the position again (issue 10).
RANGE_FETCH_WAIT_MS = 10
RANGE_POLL_MS = 20


def kafka_auth(settings: CommonSettings) -> dict[str, Any]:
    """The aiokafka keyword arguments that log a client in as `settings.kafka_username`."""
    if settings.kafka_security_protocol == "PLAINTEXT":
        return {"security_protocol": "PLAINTEXT"}
    username, password = settings.kafka_login()
    options = {"security_protocol": settings.kafka_security_protocol, "sasl_mechanism": settings.kafka_sasl_mechanism,
               "sasl_plain_username": username, "sasl_plain_password": password}
    if settings.kafka_security_protocol == "SASL_SSL":  # aiokafka refuses SSL without a context
        options["ssl_context"] = create_ssl_context()
    return options


def make_admin(settings: CommonSettings, **overrides: Any) -> AIOKafkaAdminClient:
    return AIOKafkaAdminClient(**{"bootstrap_servers": settings.kafka_bootstrap, **kafka_auth(settings), **overrides})


def make_client(settings: CommonSettings, **overrides: Any) -> AIOKafkaClient:
    """A bare client, for the requests aiokafka has no higher API for (group_removal.py)."""
    return AIOKafkaClient(**{"bootstrap_servers": settings.kafka_bootstrap, **kafka_auth(settings), **overrides})


def make_producer(settings: CommonSettings, **overrides: Any) -> AIOKafkaProducer:
    options = dict(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), acks="all",
                   enable_idempotence=True, linger_ms=2, request_timeout_ms=30_000,
                   max_request_size=producer_max_request_size(settings.max_record_bytes))
    options.update(overrides)
    return AIOKafkaProducer(**options)


def make_consumer(settings: CommonSettings, *topics: str, group_id: str | None, **overrides: Any) -> AIOKafkaConsumer:
    options = dict(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), group_id=group_id,
                   enable_auto_commit=False, auto_offset_reset="earliest",
                   isolation_level="read_committed", session_timeout_ms=10_000,
                   heartbeat_interval_ms=1_000, max_poll_interval_ms=300_000)
    options.update(overrides)
    return AIOKafkaConsumer(*topics, **options)



async def send_keyed(producer: AIOKafkaProducer, topic: str, session_id: str, model: BaseModel,
                     partitions: int, headers: Sequence[tuple[str, bytes]] = ()) -> Any:
    """Sends one record keyed by session id to the session's partition, with `headers` and the
    current trace context in its headers (none when not tracing); waits for the ack."""
    sent = [*headers, *(tracing.headers() or ())] or None
    return await producer.send_and_wait(topic, encode(model), key=record_key(session_id),
                                        partition=partition_for(session_id, partitions), headers=sent)
