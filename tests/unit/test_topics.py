"""Partitioning: murmur2 and the partition choice agree with the Java client's default partitioner."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from wakeline.contract.topics import ALL_TOPICS, BRAIN_GROUP, PREFIX, murmur2, names, partition_for, record_key

# org.apache.kafka.common.utils.UtilsTest#testMurmur2
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS.items())
def test_murmur2_matches_kafka_java_vectors(key, expected):
    assert murmur2(key) == expected


@given(st.binary(max_size=64))
def test_murmur2_is_always_a_signed_32_bit_int(data):
    h = murmur2(data)
    assert type(h) is int and -(2**31) <= h < 2**31


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS.items())
@pytest.mark.parametrize("partitions", [1, 3, 12, 64])
def test_partition_is_java_to_positive_murmur2_mod_partitions(key, expected, partitions):
    assert partition_for(key.decode(), partitions) == (expected & 0x7FFFFFFF) % partitions


@given(st.text(min_size=1, max_size=40), st.integers(1, 1024))
def test_partition_is_in_range_and_stable(session_id, partitions):
    p = partition_for(session_id, partitions)
    assert 0 <= p < partitions
    assert partition_for(session_id, partitions) == p


def test_record_key_is_the_utf8_session_id():
    assert record_key("sess-é") == "sess-é".encode()


def test_topic_names_are_distinct_and_namespaced_by_the_prefix_in_force():
    assert len(set(ALL_TOPICS)) == len(ALL_TOPICS)
    assert all(t.startswith(f"{PREFIX}.") for t in ALL_TOPICS)
    assert ALL_TOPICS == names(PREFIX).all_topics and BRAIN_GROUP == f"{PREFIX}-brain"


def test_every_topic_and_group_is_named_from_one_prefix():
    blue = names("blue")
    assert blue.all_topics == ("blue.inbox", "blue.events", "blue.tool-calls", "blue.tool-results", "blue.dead-letter",
                               "blue.model-deltas")
    assert [blue.group(s) for s in ("brain", "runner", "archiver")] == ["blue-brain", "blue-runner", "blue-archiver"]
