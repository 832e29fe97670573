"""Where the archiver starts: the offsets stored with the archive, not Kafka's commits."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from archiver_harness import (
    Session, archived_offsets, archiver_settings, brain_producer, created, draft, end_offsets, eventually,
    private_topics, produce, require_stack, running_archiver, stored_events,
)
from wakeline.log.chain import seal
from wakeline.storage.pg import TenantPool
from wakeline.contract.topics import partition_for

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


async def test_restarted_archiver_resumes_from_postgres_offsets_even_when_kafka_commits_lag(tmp_path) -> None:
    settings = archiver_settings(tmp_path)
    await require_stack(settings)
    session = Session()
    partition = partition_for(session.session_id, settings.partitions)
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            private_topics(settings) as topics, brain_producer(settings) as producer:
        async with running_archiver(settings, topics) as archiver:
            first = session.seal([created(), draft("user_message", text="one")])
            await produce(producer, settings, topics.events, first)
            await eventually(lambda: _has(pool, session, 2), "the first two events")
            await archiver.stopped()

        # A record the archive already covers, as far as Postgres says: a conflicting
        # seq 2. Kafka's committed offset for the group is still before it; if the
        # restarted archiver went by Kafka it would read it and stop.
        impostor = seal(draft("user_message", text="never read"), session_id=session.session_id,
                        tenant=session.tenant, seq=2, prev_hash=first[0].hash, ts=datetime.now(UTC),
                        event_id=str(uuid.uuid4()))
        await produce(producer, settings, topics.events, [impostor])
        end = (await end_offsets(settings, topics.events))[partition]
        async with pool.system_transaction() as conn:
            await conn.execute("UPDATE archiver_offsets SET next_offset = $1 WHERE consumer_group = $2 "
                               "AND topic = $3 AND partition = $4", end, settings.archiver_group, topics.events,
                               partition)

        async with running_archiver(settings, topics) as archiver:
            later = session.seal([draft("turn_started", turn=1)])
            await produce(producer, settings, topics.events, later)
            await eventually(lambda: _has(pool, session, 3), "the event after the restart",
                             failed=lambda: archiver.task.done() and archiver.task.exception())
            assert await stored_events(pool, session) == session.events
            assert (await archived_offsets(pool, settings.archiver_group, topics.events))[partition] > end
            assert not archiver.task.done()


async def _has(pool: TenantPool, session: Session, count: int) -> bool:
    return len(await stored_events(pool, session)) >= count
