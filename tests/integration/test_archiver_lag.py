"""`archiver_lag`: committed events not yet archived, per partition of the events topic."""

from __future__ import annotations

import pytest

from archiver_harness import (
    Session, archiver_settings, brain_producer, created, draft, eventually, private_topics, produce,
    require_stack, running_archiver,
)
from wakeline.storage.pg import TenantPool
from wakeline.contract.topics import partition_for
from wakeline_archiver.lag import archiver_lag

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


async def test_lag_counts_unarchived_committed_events_and_is_zero_once_caught_up(tmp_path) -> None:
    settings = archiver_settings(tmp_path)
    await require_stack(settings)
    session, dropped = Session(), Session()
    partition = partition_for(session.session_id, settings.partitions)
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            private_topics(settings) as topics, brain_producer(settings) as producer:
        # Two records of an aborted transaction, then five events, each transaction with its marker.
        await produce(producer, settings, topics.events, dropped.seal([created(), draft("woke", host="h",
                      reason="r", from_seq=1)]), commit=False)
        await produce(producer, settings, topics.events, session.seal([created()]))
        await produce(producer, settings, topics.events,
                      session.seal([draft("user_message", text=f"m{n}") for n in range(4)]))

        before = await archiver_lag(settings, pool, settings.archiver_group, topics.events)
        dropped_partition = partition_for(dropped.session_id, settings.partitions)
        assert before[partition]["lag"] == 5
        assert before[partition]["archived_offset"] == 0
        assert before[partition]["end_offset"] >= 5 + 2  # two commit markers
        assert all(v["lag"] == 0 for p, v in before.items() if p not in (partition, dropped_partition))
        assert before[dropped_partition]["lag"] == (5 if dropped_partition == partition else 0)

        async with running_archiver(settings, topics):
            after = await eventually(lambda: _caught_up(settings, pool, topics.events), "lag 0 everywhere")
        assert after[partition]["end_offset"] == before[partition]["end_offset"]
        assert after[partition]["archived_offset"] < after[partition]["end_offset"]  # stops before the marker


async def _caught_up(settings, pool, topic):
    lag = await archiver_lag(settings, pool, settings.archiver_group, topic)
    return lag if all(v["lag"] == 0 for v in lag.values()) else None
