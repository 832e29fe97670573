"""Creating the wakeline topics and holding them to the settings: partitions, replication,
min ISR, retention and the largest message.

`topic_settings` is the configuration a topic is created with; `ensure_topics` creates the
missing ones and reconciles the rest (`python -m wakeline.ops.admin topics [--fix]`);
`check_topics` only reports. The clients that read and write the topics are kafka_io.py's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError

from wakeline.contract.limits import topic_max_message_bytes
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import ALL_TOPICS, is_live_only
from wakeline.transport.kafka_io import make_admin

log = logging.getLogger(__name__)
_DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs config_source: set on the topic itself


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
