"""How far the archive trails `wakeline.events`, per partition: `archiver_lag`.

For the gateway (and the archiver's own periodic log line):

    from wakeline_archiver.lag import archiver_lag
    lag = await archiver_lag(settings, pool)   # {partition: {"end_offset", "archived_offset", "lag"}}

`end_offset` is the partition's last stable offset (what a read-committed reader can
reach; records of an open transaction are not counted yet), `archived_offset` the
archive's next offset for the partition (0 if it has none), and `lag` how many
committed events lie between them. The brain writes in transactions, and each commit
leaves a marker that takes an offset but is no event; the archive's offset stops before
it. So when the distance is small, the probe reads it and counts real records only:
a caught-up archive reports lag 0, not 1.
"""

from __future__ import annotations

import asyncio
from typing import TypedDict

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from wakeline.transport.kafka_io import RANGE_FETCH_WAIT_MS, RANGE_POLL_MS, kafka_auth
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import ARCHIVER_GROUP, EVENTS

DEFAULT_GROUP = ARCHIVER_GROUP
# Distances up to this many offsets are read and counted; beyond, the distance is the lag.
COUNTED_DISTANCE = 256
_ARCHIVED = "SELECT partition, next_offset FROM archiver_offsets WHERE consumer_group = $1 AND topic = $2"


class PartitionLag(TypedDict):
    end_offset: int
    archived_offset: int
    lag: int


async def archiver_lag(settings: CommonSettings, pool: TenantPool, group: str = DEFAULT_GROUP,
                       topic: str = EVENTS) -> dict[int, PartitionLag]:
    """One-shot: opens a probe, measures every partition of `wakeline.events`, closes it."""
    async with LagProbe(settings, topic) as probe:
        return await probe.measure(pool, group)


class LagProbe:
    """A reusable measurer (one Kafka connection) for callers that ask often."""

    def __init__(self, settings: CommonSettings, topic: str = EVENTS, read_timeout_s: float = 2.0):
        self._topic = topic
        self._partitions = [TopicPartition(topic, p) for p in range(settings.partitions)]
        self._read_timeout_s = read_timeout_s
        self._consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings),
                                          group_id=None,
                                          enable_auto_commit=False, isolation_level="read_committed",
                                          fetch_max_wait_ms=RANGE_FETCH_WAIT_MS)
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> LagProbe:
        await self._consumer.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._consumer.stop()

    async def measure(self, pool: TenantPool, group: str = DEFAULT_GROUP) -> dict[int, PartitionLag]:
        async with pool.system_transaction() as conn:
            archived = {r["partition"]: r["next_offset"] for r in await conn.fetch(_ARCHIVED, group, self._topic)}
        async with self._lock:
            ends = await self._consumer.end_offsets(self._partitions)
            near = {tp: archived.get(tp.partition, 0) for tp in self._partitions
                    if 0 < ends[tp] - archived.get(tp.partition, 0) <= COUNTED_DISTANCE}
            counted = await self._count_records(near, ends) if near else {}
        result: dict[int, PartitionLag] = {}
        for tp in self._partitions:
            start = archived.get(tp.partition, 0)
            lag = counted.get(tp, max(0, ends[tp] - start))
            result[tp.partition] = PartitionLag(end_offset=ends[tp], archived_offset=start, lag=lag)
        return result

    async def _count_records(self, starts: dict[TopicPartition, int],
                             ends: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Committed records in [start, end) per partition; the distance where reading runs out of time."""
        self._consumer.assign(list(starts))
        for tp, start in starts.items():
            self._consumer.seek(tp, start)
        self._consumer.resume(*starts)  # the last count left them paused
        counts = dict.fromkeys(starts, 0)
        pending = set(starts)
        deadline = asyncio.get_running_loop().time() + self._read_timeout_s
        # Short fetch waits and polls (`RANGE_POLL_MS`), and a partition read to its end
        # paused, as in the brain's tail reads: nothing may long-poll in front of the next
        # measure's end_offsets.
        try:
            while pending and asyncio.get_running_loop().time() < deadline:
                fetched = await self._consumer.getmany(*pending, timeout_ms=RANGE_POLL_MS)
                for tp, records in fetched.items():
                    counts[tp] += sum(1 for r in records if r.offset < ends[tp])
                for tp in list(pending):
                    if await self._consumer.position(tp) >= ends[tp]:
                        pending.discard(tp)
                        self._consumer.pause(tp)
        finally:
            self._consumer.pause(*starts)
        return {tp: (ends[tp] - starts[tp] if tp in pending else n) for tp, n in counts.items()}
