"""Topic names, consumer groups, record keys and partitioning: the one place that knows them.

Every name one deployment's processes share comes from one prefix, `WAKELINE_TOPIC_PREFIX`
(default `wakeline`): the six topics `<prefix>.inbox`, `<prefix>.events`, ..., and the
services' consumer groups `<prefix>-brain`, `<prefix>-runner`, `<prefix>-archiver`, which
the brain's transactional ids extend (`<prefix>-brain-p<p>`). The prefix is read once, at
import, so the module constants below (`EVENTS`, `BRAIN_GROUP`, ...) are what every
importer uses; `make test` sets `wakeline-test`, so the suite never reads, writes, joins
or fences what `make demo` runs. `names(prefix)` gives another prefix's names (the ACLs,
tests).

Every record is keyed by session id and placed with murmur2 exactly as the Java client's
default partitioner does (`toPositive(murmur2(key)) % partitions`), so a producer in any
language that uses that default routes a session to the same partition as we do. All
wakeline topics share one partition count, so partition p of every topic holds the same
sessions and the brain that owns inbox partition p is the single writer of events p.
"""

from __future__ import annotations

from dataclasses import dataclass

from wakeline.runtime.settings import DEFAULT_TOPIC_PREFIX, Naming


@dataclass(frozen=True)
class Names:
    prefix: str
    inbox: str
    events: str
    tool_calls: str
    tool_results: str
    dead_letter: str
    # The model's text as it streams, for live viewers only: never archived, never the
    # log, kept briefly (`deltas_retention_ms`). Partitioned by session like the rest.
    deltas: str
    # Signed checkpoints (witnesses.py): one partition, kept forever, never compacted; not
    # one of `all_topics`, which share the session partitioning.
    checkpoints: str

    @property
    def all_topics(self) -> tuple[str, ...]:
        return (self.inbox, self.events, self.tool_calls, self.tool_results, self.dead_letter, self.deltas)

    def group(self, service: str) -> str:
        """A service's consumer group (and, for the brain, the start of its transactional ids)."""
        return f"{self.prefix}-{service}"


def names(prefix: str) -> Names:
    return Names(prefix, f"{prefix}.inbox", f"{prefix}.events", f"{prefix}.tool-calls", f"{prefix}.tool-results",
                 f"{prefix}.dead-letter", f"{prefix}.{DELTAS_SUFFIX}", f"{prefix}.checkpoints")


DELTAS_SUFFIX = "model-deltas"


def is_live_only(topic: str) -> bool:
    """A topic whose records only live viewers need (the deltas): short retention."""
    return topic.endswith(f".{DELTAS_SUFFIX}")


# On an events record that a caller waits to read back from the archive: a create's or a
# fork's `session_created`, a delete's `deleted` (the gateway answers those only once Postgres
# has them, `dispatch.py`). The archiver stores the batch it is gathering at once instead of at
# the end of its window, so a longer window (fewer, larger transactions for the steps' events)
# does not lengthen those answers. Not `input_rejected`: a Kafka client's flood over its quota
# makes one per command, and each would cut a batch short; the rare refused create or delete
# waits out the window.
ARCHIVE_NOW_HEADER = "wakeline-archive-now"
ARCHIVE_NOW_TYPES = frozenset({"session_created", "deleted"})

DEFAULT_PREFIX = DEFAULT_TOPIC_PREFIX
NAMES = names(Naming().topic_prefix)
PREFIX = NAMES.prefix
INBOX = NAMES.inbox
EVENTS = NAMES.events
TOOL_CALLS = NAMES.tool_calls
TOOL_RESULTS = NAMES.tool_results
DEAD_LETTER = NAMES.dead_letter
DELTAS = NAMES.deltas
CHECKPOINTS = NAMES.checkpoints
ALL_TOPICS = NAMES.all_topics
BRAIN_GROUP = NAMES.group("brain")
RUNNER_GROUP = NAMES.group("runner")
ARCHIVER_GROUP = NAMES.group("archiver")

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
