"""A second history, or a gap, in an archived session stops the archiver, loudly, committing nothing.

Runs in-process on private topics: the conflicting record must never reach another
archiver (it would stop that one too).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, datetime

import pytest

from test_archiver_harness import (
    Session, archived_offsets, archiver_settings, brain_producer, created, draft, eventually,
    private_topics, produce, require_stack, running_archiver, session_row, stored_events,
)
from wakeline.chain import seal
from wakeline.pg import TenantPool
from wakeline.topics import partition_for
from wakeline_archiver.conflict import BrokenChain, ConflictingEvent

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


async def test_redelivered_event_with_different_content_stops_the_archiver_and_commits_nothing(
        tmp_path, caplog) -> None:
    # Batches of exactly three, and a window long enough that three records that become
    # visible together (one Kafka transaction) are taken as one batch.
    settings = archiver_settings(tmp_path, archiver_batch_size=3, archiver_batch_window_s=5.0)
    await require_stack(settings)
    partition = lambda s: partition_for(s.session_id, settings.partitions)  # noqa: E731
    original = Session()
    bystander = Session(tenant=original.tenant, session_id=_session_id_on(partition(original), settings))
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            private_topics(settings) as topics, brain_producer(settings) as producer, \
            running_archiver(settings, topics) as archiver:
        first = original.seal([created(), draft("user_message", text="the real one"), draft("turn_started", turn=1)])
        await produce(producer, settings, topics.events, first)
        await eventually(lambda: _count(pool, original, 3), "the original history to be archived")
        offsets_before = await archived_offsets(pool, settings.archiver_group, topics.events)

        impostor = seal(draft("user_message", text="a different history"), session_id=original.session_id,
                        tenant=original.tenant, seq=2, prev_hash=first[0].hash, ts=datetime.now(UTC),
                        event_id=str(uuid.uuid4()))
        batch = bystander.seal([created()]) + [impostor] + bystander.seal([draft("user_message", text="hi")])
        caplog.set_level(logging.CRITICAL, logger="wakeline_archiver")
        await produce(producer, settings, topics.events, batch)

        with pytest.raises(ConflictingEvent) as raised:
            await asyncio.wait_for(asyncio.shield(archiver.task), 30)
        conflict = raised.value
        assert (conflict.session_id, conflict.seq) == (original.session_id, 2)
        assert (conflict.stored_hash, conflict.incoming_hash) == (first[1].hash, impostor.hash)
        assert any(original.session_id in r.getMessage() and first[1].hash in r.getMessage()
                   and impostor.hash in r.getMessage() for r in caplog.records if r.levelno == logging.CRITICAL)

        assert await stored_events(pool, original) == first
        assert await stored_events(pool, bystander) == []  # the rest of the batch: not committed
        assert await session_row(pool, bystander) is None
        assert await archived_offsets(pool, settings.archiver_group, topics.events) == offsets_before


async def _count(pool: TenantPool, session: Session, count: int) -> bool:
    return len(await stored_events(pool, session)) >= count


def _session_id_on(partition: int, settings) -> str:
    while partition_for(session_id := str(uuid.uuid4()), settings.partitions) != partition:
        pass
    return session_id


async def test_event_that_does_not_continue_the_archived_chain_stops_the_archiver(tmp_path) -> None:
    settings = archiver_settings(tmp_path)
    await require_stack(settings)
    session = Session()
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            private_topics(settings) as topics, brain_producer(settings) as producer, \
            running_archiver(settings, topics) as archiver:
        first = session.seal([created(), draft("user_message", text="one")])
        await produce(producer, settings, topics.events, first)
        await eventually(lambda: _count(pool, session, 2), "the first two events")

        _, after_gap = session.seal([draft("turn_started", turn=1), draft("turn_ended", turn=1)])
        await produce(producer, settings, topics.events, [after_gap])  # seq 4 without seq 3

        with pytest.raises(BrokenChain, match="seq 3 is not archived"):
            await asyncio.wait_for(asyncio.shield(archiver.task), 30)
        assert await stored_events(pool, session) == first
