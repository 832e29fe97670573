"""Kafka clients configured the way every Wakeline service needs them.

Producers: acks=all and idempotent, so an acknowledged record is on the log exactly once
per send. Consumers: manual commits only, so an offset moves after the effect is durable.
Records are placed by `topics.partition_for`, never by a client's own partitioner.
Every client logs in the one way `kafka_auth` says (SASL as the settings' principal);
anything that builds an aiokafka client of its own passes `**kafka_auth(settings)`.
"""

from __future__ import annotations

import logging
from typing import Any
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError
from pydantic import BaseModel

from wakeline.runtime import tracing
from wakeline.contract.codec import encode
from wakeline.contract.limits import producer_max_request_size, topic_max_message_bytes
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import ALL_TOPICS, is_live_only, partition_for, record_key

log = logging.getLogger(__name__)
_DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs config_source: set on the topic itself


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


def topic_settings(settings: CommonSettings, topic: str | None = None) -> dict[str, str]:
    """The configuration a wakeline topic is created with.

    Five topics share one retention: events and tool topics are the log until the
    archiver has stored them, and the dead-letter topic is the only copy of a rejected
    record and its reason until the archiver has projected it. The model-deltas topic
    (live viewers only, never archived) keeps `deltas_retention_ms`.
    """
    retention = settings.deltas_retention_ms if topic is not None and is_live_only(topic) \
        else settings.events_retention_ms
    return {"min.insync.replicas": str(settings.min_insync_replicas),
            "retention.ms": str(retention),
            "max.message.bytes": str(topic_max_message_bytes(settings.max_record_bytes))}


@dataclass(frozen=True)
class FoundTopic:
    name: str
    partitions: int
    replication: int
    configs: dict[str, str]  # every effective config, defaults included
    dynamic: dict[str, str]  # only those set on the topic itself


@dataclass(frozen=True)
class TopicMismatch:
    topic: str
    key: str
    found: str
    wanted: str

    def __str__(self) -> str:
        return f"topic {self.topic}: {self.key} is {self.found}, wanted {self.wanted}"


def topic_mismatches(topic: FoundTopic, settings: CommonSettings) -> list[TopicMismatch]:
    """How an existing topic contradicts the settings (partition count aside: that is fatal)."""
    wanted = topic_settings(settings, topic.name)
    found = {"replication.factor": str(topic.replication), **topic.configs}
    out = [TopicMismatch(topic.name, "replication.factor", found["replication.factor"],
                         str(settings.replication_factor))] if topic.replication != settings.replication_factor else []
    for key in ("min.insync.replicas", "retention.ms"):
        if found.get(key) != wanted[key]:
            out.append(TopicMismatch(topic.name, key, found.get(key, "?"), wanted[key]))
    # A larger max.message.bytes is harmless: the producers' max_request_size is the bound.
    if int(found.get("max.message.bytes", "0")) < int(wanted["max.message.bytes"]):
        out.append(TopicMismatch(topic.name, "max.message.bytes", found.get("max.message.bytes", "?"),
                                 wanted["max.message.bytes"]))
    return out


async def send_keyed(producer: AIOKafkaProducer, topic: str, session_id: str, model: BaseModel,
                     partitions: int) -> Any:
    """Sends one record keyed by session id to the session's partition, with the current trace
    context in its headers (none when not tracing); waits for the ack."""
    return await producer.send_and_wait(topic, encode(model), key=record_key(session_id),
                                        partition=partition_for(session_id, partitions), headers=tracing.headers())


async def ensure_topics(settings: CommonSettings, topics: tuple[str, ...] = ALL_TOPICS,
                        fix: bool = False) -> list[str]:
    """Creates missing wakeline topics as `topic_settings` says; returns those created.

    An existing topic with another partition count is an error: it would split a
    session's records across brains. Any other contradiction (replication, min ISR,
    retention, max.message.bytes) is logged as a warning naming topic, key, found and
    wanted. A max.message.bytes below what the records need is always raised to it: a
    record the gateway accepted and the broker refused would stall its partition, and
    raising it loses nothing. Retention and min ISR are the operator's to change (they
    may be deliberate): `fix=True` sets them. Replication is only reported.
    """
    admin = make_admin(settings)
    await admin.start()
    try:
        existing = await _describe_topics(admin, topics)
        wrong = {t: d.partitions for t, d in existing.items() if d.partitions != settings.partitions}
        if wrong:
            raise RuntimeError(f"topics exist with a partition count other than {settings.partitions}: {wrong}")
        missing = [t for t in topics if t not in existing]
        if missing:
            try:
                response = await admin.create_topics([NewTopic(t, settings.partitions, settings.replication_factor,
                                                               topic_configs=topic_settings(settings, t))
                                                      for t in missing])
            except TopicAlreadyExistsError:
                response = None  # another process created them between our look and our create
            _raise_creation_errors(response)
        await _reconcile(admin, settings, [existing[t] for t in topics if t in existing], fix)
        return missing
    finally:
        await admin.close()


def _raise_creation_errors(response: Any) -> None:
    """The broker answers per topic; a refusal (say replication 3 on one broker) is an error."""
    errors = response.to_object()["topic_errors"] if response is not None else []
    refused = {e["topic"]: e.get("error_message") or f"error code {e['error_code']}" for e in errors
               if e["error_code"] not in (0, TopicAlreadyExistsError.errno)}
    if refused:
        raise RuntimeError(f"the broker refused to create topics: {refused}")


async def check_topics(settings: CommonSettings, topics: tuple[str, ...] = ALL_TOPICS) -> list[TopicMismatch]:
    """What `ensure_topics` would warn about, without changing anything."""
    admin = make_admin(settings)
    await admin.start()
    try:
        found = await _describe_topics(admin, topics)
        return [m for d in found.values() for m in topic_mismatches(d, settings)]
    finally:
        await admin.close()


async def _reconcile(admin: AIOKafkaAdminClient, settings: CommonSettings, found: list[FoundTopic],
                     fix: bool) -> None:
    alterable = {"max.message.bytes"} | ({"retention.ms", "min.insync.replicas"} if fix else set())
    for topic in found:
        mismatches = topic_mismatches(topic, settings)
        for m in mismatches:
            log.warning("%s; %s", m, _REMEDY[m.key] if m.key not in alterable else "setting it")
        wanted = topic_settings(settings, topic.name)
        changes = {m.key: wanted[m.key] for m in mismatches if m.key in alterable}
        if changes:
            # Legacy AlterConfigs replaces a topic's whole dynamic config: keep what is set.
            resource = ConfigResource(ConfigResourceType.TOPIC, topic.name, {**topic.dynamic, **changes})
            for response in await admin.alter_configs([resource]):
                for r in response.to_object()["resources"]:
                    if r["error_code"]:
                        raise RuntimeError(f"could not set {changes} on {topic.name}: "
                                           f"{r['error_message'] or r['error_code']}")


_REMEDY = {
    "replication.factor": "changing it needs a partition reassignment (kafka-reassign-partitions.sh)",
    "min.insync.replicas": "`python -m wakeline.ops.admin topics --fix` sets it",
    "retention.ms": "`python -m wakeline.ops.admin topics --fix` sets it; until then records older than it are deleted",
}


async def _describe_topics(admin: AIOKafkaAdminClient, topics: tuple[str, ...]) -> dict[str, FoundTopic]:
    described = [d for d in await admin.describe_topics(list(topics)) if d.get("error_code", 0) == 0]
    if not described:
        return {}
    response = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, d["topic"], None)
                                             for d in described])
    configs = {r["resource_name"]: r["config_entries"] for resp in response for r in resp.to_object()["resources"]}
    found = {}
    for d in described:
        entries = configs.get(d["topic"], [])
        found[d["topic"]] = FoundTopic(
            name=d["topic"], partitions=len(d["partitions"]),
            replication=min((len(p["replicas"]) for p in d["partitions"]), default=0),
            configs={e["config_names"]: e["config_value"] for e in entries},
            dynamic={e["config_names"]: e["config_value"] for e in entries
                     if e["config_source"] == _DYNAMIC_TOPIC_CONFIG})
    return found
