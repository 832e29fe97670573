"""A second history, or a gap, in an archived session parks that session, loudly; the rest is archived.

Runs in-process on private topics: the conflicting record must never reach another
archiver. Each test counts the bystander sessions archived beside the parked one, and
checks the archiver is still running.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

import pytest

from archiver_harness import (
    Session, archived_all, archiver_settings, brain_producer, created, dead_letters_for, draft, eventually, parked_row,
    private_topics, produce, require_stack, running_archiver, stored_events,
)
from wakeline.log.chain import seal
from wakeline.storage.pg import TenantPool
from wakeline.contract.topics import partition_for
from wakeline_archiver.lag import archiver_lag

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


def _session_id_on(partition: int, settings) -> str:
    while partition_for(session_id := str(uuid.uuid4()), settings.partitions) != partition:
        pass
    return session_id


async def test_redelivered_event_with_different_content_parks_its_session_and_the_batch_is_archived(
        tmp_path, caplog) -> None:
    # Batches of exactly three, and a window long enough that three records that become
    # visible together (one Kafka transaction) are taken as one batch: the conflict sits
    # between two bystander events in the same batch.
    settings = archiver_settings(tmp_path, archiver_batch_size=3, archiver_batch_window_s=5.0)
    await require_stack(settings)
    original = Session()
    bystander = Session(tenant=original.tenant,
                        session_id=_session_id_on(partition_for(original.session_id, settings.partitions), settings))
    caplog.set_level(logging.CRITICAL, logger="wakeline_archiver")
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            private_topics(settings) as topics, brain_producer(settings) as producer, \
            running_archiver(settings, topics) as archiver:
        first = original.seal([created(), draft("user_message", text="the real one"), draft("turn_started", turn=1)])
        await produce(producer, settings, topics.events, first)
        await eventually(lambda: archived_all(pool, [original]), "the original history to be archived")

        impostor = seal(draft("user_message", text="a different history"), session_id=original.session_id,
                        tenant=original.tenant, seq=2, prev_hash=first[0].hash, ts=datetime.now(UTC),
                        event_id=str(uuid.uuid4()))
        batch = bystander.seal([created()]) + [impostor] + bystander.seal([draft("user_message", text="hi")])
        await produce(producer, settings, topics.events, batch)
        # The original history goes on; nothing of it may land above the conflict.
        await produce(producer, settings, topics.events, original.seal([draft("turn_ended", turn=1)]))
        more = bystander.seal([draft("turn_started", turn=1), draft("turn_ended", turn=1)])
        await produce(producer, settings, topics.events, more)

        await eventually(lambda: archived_all(pool, [bystander]), "the bystander, beside the conflict",
                         failed=lambda: archiver.task.done() and archiver.task.exception())
        parked = await eventually(lambda: parked_row(pool, original), "the original session to be parked")
        assert parked["from_seq"] == 2
        assert first[1].hash in parked["reason"] and impostor.hash in parked["reason"]
        assert any(original.session_id in r.getMessage() and impostor.hash in r.getMessage()
                   for r in caplog.records if r.levelno == logging.CRITICAL)
        letters = await eventually(lambda: _letters(pool, topics.dead_letter, original.session_id, 2),
                                   "the impostor and the later event to be dead-lettered")
        assert "conflicting event" in letters[0]["reason"] and "parked from seq 2" in letters[1]["reason"]
        assert await stored_events(pool, original) == first
        assert len(bystander.events) == 4 and not archiver.task.done()
        await eventually(lambda: _caught_up(settings, pool, topics.events), "the archive's offsets past the batch")


async def _caught_up(settings, pool: TenantPool, topic: str) -> bool:
    lag = await archiver_lag(settings, pool, settings.archiver_group, topic)
    return all(p["lag"] == 0 for p in lag.values())


async def _letters(pool: TenantPool, topic: str, session_id: str, count: int) -> list | None:
    letters = await dead_letters_for(pool, topic, session_id)
    return letters if len(letters) >= count else None


async def test_event_that_does_not_continue_the_archived_chain_parks_its_session(tmp_path) -> None:
    settings = archiver_settings(tmp_path)
    await require_stack(settings)
    session, bystanders = Session(), [Session() for _ in range(3)]
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            private_topics(settings) as topics, brain_producer(settings) as producer, \
            running_archiver(settings, topics) as archiver:
        first = session.seal([created(), draft("user_message", text="one")])
        await produce(producer, settings, topics.events, first)
        await eventually(lambda: archived_all(pool, [session]), "the first two events")

        _, after_gap = session.seal([draft("turn_started", turn=1), draft("turn_ended", turn=1)])
        await produce(producer, settings, topics.events, [after_gap])  # seq 4 without seq 3
        for bystander in bystanders:
            await produce(producer, settings, topics.events, bystander.seal([created(), *_a_turn()]))

        await eventually(lambda: archived_all(pool, bystanders), "every bystander session",
                         failed=lambda: archiver.task.done() and archiver.task.exception())
        parked = await eventually(lambda: parked_row(pool, session), "the session with a gap to be parked")
        assert parked["from_seq"] == 4 and "seq 3 is not archived" in parked["reason"]
        assert await stored_events(pool, session) == first
        assert sum(len(b.events) for b in bystanders) == 9 and not archiver.task.done()


def _a_turn():
    return [draft("turn_started", turn=1), draft("turn_ended", turn=1)]
