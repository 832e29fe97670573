"""Poison beside healthy sessions: the poisoned session is parked and dead-lettered, the rest archived.

In-process archivers on private topics. Poison is what a buggy or foreign producer could
write on the events topic: an event whose actor is 5 KB (no btree can index it), a
causation id with a control character, a record that is not JSON, two tenants using one
session id. Each test counts the healthy sessions archived after the poison, and checks
that the archiver is still running.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from archiver_harness import (
    Session, archived_all, archiver_settings, brain_producer, created, dead_letters_for, draft, eventually,
    parked_row, private_topics, produce, require_stack, running_archiver, stored_events, turn,
)
from wakeline.log.chain import event_hash
from wakeline.storage.pg import TenantPool
from wakeline.contract.topics import partition_for, record_key

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


def poison(session: Session, item, **changes: Any) -> bytes:
    """The session's next event with `changes`, hashed and linked like a real one; later seals chain to it."""
    [good] = session.seal([item])
    body = good.model_dump(mode="json") | changes
    body["hash"] = event_hash(body)
    session.events[-1] = good.model_copy(update={"hash": body["hash"]})  # what later events link to
    return json.dumps(body).encode()


async def produce_raw(producer, settings, topic: str, session_id: str, values: list[bytes]) -> None:
    await producer.begin_transaction()
    for value in values:
        await producer.send_and_wait(topic, value, key=record_key(session_id),
                                     partition=partition_for(session_id, settings.partitions))
    await producer.commit_transaction()


async def _letters(pool: TenantPool, topic: str, session_id: str, count: int) -> list | None:
    letters = await dead_letters_for(pool, topic, session_id)
    return letters if len(letters) >= count else None


async def test_poisoned_sessions_are_parked_and_dead_lettered_while_healthy_ones_are_archived(
        tmp_path, caplog) -> None:
    settings = archiver_settings(tmp_path)
    await require_stack(settings)
    healthy = [Session() for _ in range(6)]
    big_actor, bad_causation = Session(), Session()
    caplog.set_level(logging.CRITICAL, logger="wakeline_archiver")
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            private_topics(settings) as topics, brain_producer(settings) as producer, \
            running_archiver(settings, topics) as archiver:
        for session in healthy[:3]:
            await produce(producer, settings, topics.events, session.seal([created(), *turn(1)]))
        for session, changes in ((big_actor, {"actor": "user:" + "x" * 5_000}),
                                 (bad_causation, {"causation_id": "cmd-\x07-bell"})):
            await produce(producer, settings, topics.events, session.seal([created(), draft("user_message", text="a")]))
            bad = poison(session, draft("turn_started", turn=1), **changes)
            later = session.seal([draft("turn_ended", turn=1), draft("user_message", text="after the poison")])
            await produce_raw(producer, settings, topics.events, session.session_id, [bad])
            await produce(producer, settings, topics.events, later)
        await produce_raw(producer, settings, topics.events, "not-json", [b"\x00{not json"])
        for session in healthy:
            await produce(producer, settings, topics.events, session.seal(turn(2) if session.events else
                                                                          [created(), *turn(1)]))

        await eventually(lambda: archived_all(pool, healthy), "every healthy session, after the poison",
                         failed=lambda: archiver.task.done() and archiver.task.exception())
        assert sum(len(s.events) for s in healthy) == 3 * 13 + 3 * 7
        for session, field in ((big_actor, "actor"), (bad_causation, "causation_id")):
            parked = await eventually(lambda: parked_row(pool, session), f"the session with a bad {field} parked")
            assert parked["from_seq"] == 3 and f"{field}:" in parked["reason"]
            assert await stored_events(pool, session) == session.events[:2]
            letters = await eventually(lambda: _letters(pool, topics.dead_letter, session.session_id, 3),
                                       f"seq 3, 4 and 5 of the bad-{field} session dead-lettered")
            assert all(f"{field}:" in letter["reason"] for letter in letters)
            assert [letter["reason"].startswith("session parked from seq 3") for letter in letters] == [
                False, True, True]
            assert any(session.session_id in r.getMessage() for r in caplog.records if r.levelno == logging.CRITICAL)
        [garbage] = await eventually(lambda: _letters(pool, topics.dead_letter, "not-json", 1), "the non-JSON record")
        assert garbage["service"] == "archiver"
        assert not archiver.task.done()


async def test_two_tenants_with_one_session_id_park_the_second_and_archive_the_first(tmp_path) -> None:
    settings = archiver_settings(tmp_path)
    await require_stack(settings)
    first = Session()
    second = Session(session_id=first.session_id)  # another tenant, the same id
    bystanders = [Session(tenant=t) for t in (first.tenant, second.tenant, None)]
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            private_topics(settings) as topics, brain_producer(settings) as producer, \
            running_archiver(settings, topics) as archiver:
        await produce(producer, settings, topics.events, first.seal([created(), draft("user_message", text="mine")]))
        await eventually(lambda: archived_all(pool, [first]), "the first tenant's session")

        await produce(producer, settings, topics.events, second.seal([created(), *turn(1)]))
        for session in bystanders:
            await produce(producer, settings, topics.events, session.seal([created(), *turn(1)]))
        await produce(producer, settings, topics.events, first.seal(turn(1)))

        await eventually(lambda: archived_all(pool, [first, *bystanders]), "the first tenant and the bystanders",
                         failed=lambda: archiver.task.done() and archiver.task.exception())
        assert len(first.events) == 8 and sum(len(s.events) for s in bystanders) == 21
        parked = await eventually(lambda: parked_row(pool, second), "the second tenant's session parked")
        assert parked["from_seq"] == 1 and "another tenant" in parked["reason"]
        assert await parked_row(pool, first) is None
        assert await stored_events(pool, second) == []
        letters = await eventually(lambda: _letters(pool, topics.dead_letter, second.session_id, 7),
                                   "all seven of the second tenant's events dead-lettered")
        assert len(letters) == 7 and not archiver.task.done()


async def test_a_parked_session_stays_parked_across_a_restart_without_retrying_its_poison(tmp_path) -> None:
    settings = archiver_settings(tmp_path)
    await require_stack(settings)
    session, bystander = Session(), Session()
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            private_topics(settings) as topics, brain_producer(settings) as producer:
        async with running_archiver(settings, topics) as archiver:
            await produce(producer, settings, topics.events, session.seal([created(), draft("user_message", text="a")]))
            bad = poison(session, draft("turn_started", turn=1), actor="user:" + "x" * 5_000)
            await produce_raw(producer, settings, topics.events, session.session_id, [bad])
            await eventually(lambda: parked_row(pool, session), "the poisoned session parked")
            await archiver.stopped()

        async with running_archiver(settings, topics) as archiver:
            await produce(producer, settings, topics.events, session.seal([draft("turn_ended", turn=1)]))
            await produce(producer, settings, topics.events, bystander.seal([created(), *turn(1)]))
            await eventually(lambda: archived_all(pool, [bystander]), "the bystander, after the restart",
                             failed=lambda: archiver.task.done() and archiver.task.exception())
            # The restart read past the poison (offsets moved), and held seq 4 by the parked row,
            # not by a fresh chain failure: its letter carries the original reason.
            letters = await eventually(lambda: _letters(pool, topics.dead_letter, session.session_id, 2),
                                       "seq 4 dead-lettered after the restart")
            assert len(letters) == 2 and letters[1]["reason"].startswith("session parked from seq 3: ")
            assert "actor:" in letters[1]["reason"]
            assert await stored_events(pool, session) == session.events[:2]
            assert len(bystander.events) == 7 and not archiver.task.done()
