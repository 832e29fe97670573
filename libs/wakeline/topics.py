"""Topic names, record keys and partitioning: the one place that knows them.

Every record is keyed by session id and placed with murmur2 exactly as the Java client's
default partitioner does (`toPositive(murmur2(key)) % partitions`), so a producer in any
language that uses that default routes a session to the same partition as we do. All
wakeline topics share one partition count, so partition p of every topic holds the same
sessions and the brain that owns inbox partition p is the single writer of events p.
"""

from __future__ import annotations

INBOX = "wakeline.inbox"
EVENTS = "wakeline.events"
TOOL_CALLS = "wakeline.tool-calls"
TOOL_RESULTS = "wakeline.tool-results"
DEAD_LETTER = "wakeline.dead-letter"
ALL_TOPICS = (INBOX, EVENTS, TOOL_CALLS, TOOL_RESULTS, DEAD_LETTER)

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), as a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    body = length - length % 4
    for i in range(0, body, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length % 4
    if tail == 3:
        h ^= data[body + 2] << 16
    if tail >= 2:
        h ^= data[body + 1] << 8
    if tail >= 1:
        h ^= data[body]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def record_key(session_id: str) -> bytes:
    return session_id.encode("utf-8")


def partition_for(session_id: str, partitions: int) -> int:
    """The partition the Java client's default partitioner picks for this session's key."""
    return (murmur2(record_key(session_id)) & 0x7FFFFFFF) % partitions
