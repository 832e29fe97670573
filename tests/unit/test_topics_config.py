"""Topic configuration: what wakeline topics are created with, and how a contradiction reads."""

from __future__ import annotations

from wakeline.transport.topic_admin import FoundTopic, TopicMismatch, topic_mismatches, topic_settings
from wakeline.contract.limits import topic_max_message_bytes
from wakeline.runtime.settings import CommonSettings

CLUSTER = CommonSettings(replication_factor=3, min_insync_replicas=2, events_retention_ms=-1)


def found(replication: int = 3, **configs: str) -> FoundTopic:
    base = {"min.insync.replicas": "2", "retention.ms": "-1",
            "max.message.bytes": str(topic_max_message_bytes(CLUSTER.max_record_bytes))}
    return FoundTopic("wakeline.events", 6, replication, {**base, **configs}, {})


def test_topics_are_created_with_min_isr_retention_and_a_max_message_size_from_the_record_limit():
    assert topic_settings(CLUSTER) == {"min.insync.replicas": "2", "retention.ms": "-1",
                                       "max.message.bytes": str(CLUSTER.max_record_bytes + 16_384)}


def test_a_topic_that_matches_the_settings_reports_nothing():
    assert topic_mismatches(found(), CLUSTER) == []


def test_each_contradiction_names_topic_key_found_and_wanted():
    mismatches = topic_mismatches(found(replication=1, **{"min.insync.replicas": "1", "retention.ms": "604800000",
                                                          "max.message.bytes": "500000"}), CLUSTER)
    assert {m.key: (m.found, m.wanted) for m in mismatches} == {
        "replication.factor": ("1", "3"), "min.insync.replicas": ("1", "2"),
        "retention.ms": ("604800000", "-1"), "max.message.bytes": ("500000", "1016384")}
    assert str(mismatches[0]) == "topic wakeline.events: replication.factor is 1, wanted 3"


def test_a_larger_max_message_size_than_needed_is_no_contradiction():
    assert topic_mismatches(found(**{"max.message.bytes": "10485760"}), CLUSTER) == []


def test_a_finite_retention_is_reported_against_forever():
    assert topic_mismatches(found(**{"retention.ms": "86400000"}), CLUSTER) == [
        TopicMismatch("wakeline.events", "retention.ms", "86400000", "-1")]


def test_the_model_deltas_topic_keeps_its_short_retention_and_every_other_topic_the_log_s():
    from wakeline.contract.topics import ALL_TOPICS, DELTAS
    assert topic_settings(CLUSTER, DELTAS)["retention.ms"] == str(CLUSTER.deltas_retention_ms) == "600000"
    assert {topic_settings(CLUSTER, t)["retention.ms"] for t in ALL_TOPICS if t != DELTAS} == {"-1"}
    limit = str(topic_max_message_bytes(CLUSTER.max_record_bytes))
    configs = {"min.insync.replicas": "2", "retention.ms": "-1", "max.message.bytes": limit}
    deltas = FoundTopic(DELTAS, 6, 3, configs, {})
    assert [(m.key, m.wanted) for m in topic_mismatches(deltas, CLUSTER)] == [("retention.ms", "600000")]
