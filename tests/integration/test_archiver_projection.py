"""The archiver projects events, sessions and dead letters into Postgres (real Kafka, real Postgres).

One archiver runs for the module, in-process, on a private pair of topics; each test
writes fresh sessions and waits for them with bounded polling.
"""

from __future__ import annotations

import uuid

import pytest

from archiver_harness import (
    Session, archived_offsets, archiver_settings, brain_producer, created, draft, eventually,
    private_topics, produce, require_stack, running_archiver, session_row, stored_events, turn,
)
from wakeline.log.chain import first_broken_seq
from wakeline.contract.codec import DeadLetter, encode
from wakeline.log.fold import fold
from wakeline.storage.pg import TenantPool
from wakeline.contract.topics import partition_for

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


@pytest.fixture(scope="module")
async def stack(tmp_path_factory):
    settings = archiver_settings(tmp_path_factory.mktemp("archiver"))
    await require_stack(settings)
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            private_topics(settings) as topics, brain_producer(settings) as producer, \
            running_archiver(settings, topics) as archiver:
        yield settings, topics, pool, producer, archiver


async def archived(pool: TenantPool, session: Session, count: int) -> list:
    return await eventually(lambda: _if_count(pool, session, count), f"{count} events of {session.session_id}")


async def _if_count(pool: TenantPool, session: Session, count: int):
    events = await stored_events(pool, session)
    return events if len(events) >= count else None


async def test_session_events_are_archived_once_with_dense_seq_and_a_whole_chain(stack) -> None:
    settings, topics, pool, producer, archiver = stack
    sessions = [Session() for _ in range(3)]  # three tenants, interleaved in one transaction
    batch = []
    for n in (1, 2):
        for session in sessions:
            batch += session.seal(([created()] if n == 1 else []) + turn(n, is_error=n == 2))
    await produce(producer, settings, topics.events, batch)

    for session in sessions:
        events = await archived(pool, session, len(session.events))
        assert [e.seq for e in events] == list(range(1, len(session.events) + 1))
        assert first_broken_seq(events) is None
        assert events == session.events
        async with pool.transaction(session.tenant) as conn:
            tools = await conn.fetch("SELECT type, tool_name, is_error FROM events WHERE session_id = $1 "
                                     "AND tool_name IS NOT NULL ORDER BY seq", session.session_id)
            untyped = await conn.fetchval(
                "SELECT count(*) FROM events WHERE session_id = $1 AND type = 'user_message' "
                "AND tool_name IS NULL AND is_error IS NULL", session.session_id)
        assert [tuple(r) for r in tools] == [("tool_call", "bash", None), ("tool_result", "bash", False),
                                            ("tool_call", "bash", None), ("tool_result", "bash", True)]
        assert untyped == 2


async def test_redelivered_identical_event_is_a_no_op(stack) -> None:
    settings, topics, pool, producer, archiver = stack
    session = Session()
    first = session.seal([created(), draft("user_message", text="hi")])
    await produce(producer, settings, topics.events, first)
    await archived(pool, session, 2)
    offsets_before = await archived_offsets(pool, settings.archiver_group, topics.events)

    later = session.seal([draft("turn_started", turn=1)])
    await produce(producer, settings, topics.events, first + later)  # the first two again, then a new one

    events = await archived(pool, session, 3)
    assert events == session.events
    row = await session_row(pool, session)
    assert (row["last_seq"], row["status"]) == (3, "running")
    offsets_after = await archived_offsets(pool, settings.archiver_group, topics.events)
    moved = {p for p in offsets_after if offsets_after[p] != offsets_before.get(p)}
    assert moved == {partition_of(settings, session)}


def partition_of(settings, session: Session) -> int:
    return partition_for(session.session_id, settings.partitions)


def session_id_on(partition: int, settings) -> str:
    while partition_for(session_id := str(uuid.uuid4()), settings.partitions) != partition:
        pass
    return session_id


async def test_sessions_row_follows_the_fold_through_status_transitions(stack) -> None:
    settings, topics, pool, producer, archiver = stack
    session = Session()
    steps = [
        ([created(title="first")], "idle"),
        ([draft("user_message", text="go"), draft("turn_started", turn=1)], "running"),
        ([draft("turn_ended", turn=1)], "idle"),
        ([draft("title_generated", title="a better title")], "idle"),
        ([draft("session_ended", reason="max_turns")], "ended"),
        ([draft("user_message", text="carry on")], "idle"),
        ([draft("turn_started", turn=2)], "running"),
        ([draft("deleted", by="user:admin", reason="cleanup")], "deleted"),
        ([draft("user_message", text="too late")], "deleted"),
    ]
    for drafts, expected in steps:
        new = session.seal(drafts)
        await produce(producer, settings, topics.events, new)
        row = await eventually(lambda: _row_at(pool, session, new[-1].seq), f"sessions row at seq {new[-1].seq}")
        state = fold(session.events)
        assert (row["status"], state.status) == (expected, expected)
        assert (row["last_hash"], row["updated_at"]) == (new[-1].hash, new[-1].ts)
        assert row["ended_reason"] == state.ended_reason
        assert row["title"] == state.title
        if expected == "ended":
            assert row["ended_reason"] == "max_turns"

    row = await session_row(pool, session)
    assert (row["owner"], row["model"], row["title"]) == ("user:test", "scripted:test", "a better title")
    assert row["created_at"] == session.events[0].ts
    assert (row["deleted_by"], row["deleted_at"]) == ("user:admin", session.events[-2].ts)


async def _row_at(pool: TenantPool, session: Session, seq: int):
    row = await session_row(pool, session)
    return row if row and row["last_seq"] >= seq else None


async def test_malformed_record_is_dead_lettered_and_archiving_continues(stack) -> None:
    settings, topics, pool, producer, archiver = stack
    session = Session()
    partition = partition_of(settings, session)
    marker = f"not an event {uuid.uuid4()}"
    await producer.begin_transaction()
    sent = await producer.send_and_wait(topics.events, marker.encode(), key=session.session_id.encode(),
                                        partition=partition)
    await producer.commit_transaction()
    await produce(producer, settings, topics.events, session.seal([created()]))

    await archived(pool, session, 1)
    letter = await eventually(lambda: _letter(pool, marker), "the dead letter of the malformed record")
    assert (letter["topic"], letter["partition"], letter["offset"]) == (topics.events, partition, sent.offset)
    assert letter["service"] == "archiver" and letter["reason"]
    assert letter["key"] == session.session_id
    assert not archiver.task.done()


async def _letter(pool: TenantPool, marker: str):
    async with pool.system_transaction() as conn:
        return await conn.fetchrow("SELECT * FROM dead_letters WHERE value LIKE $1", f"%{marker}%")


async def test_events_of_an_aborted_transaction_are_never_archived(stack) -> None:
    settings, topics, pool, producer, archiver = stack
    aborted = Session()
    committed = Session(session_id=session_id_on(partition_of(settings, aborted), settings))
    await produce(producer, settings, topics.events, aborted.seal([created(), draft("user_message", text="x")]),
                  commit=False)
    await produce(producer, settings, topics.events, committed.seal([created()]))

    await archived(pool, committed, 1)  # later on the same partition: the aborted records were passed
    assert await stored_events(pool, aborted) == []
    assert await session_row(pool, aborted) is None


async def test_dead_letters_are_projected_including_offsetless_and_unparseable_ones(stack) -> None:
    settings, topics, pool, producer, archiver = stack
    marker = uuid.uuid4().hex
    # The brain reports inputs it rejected after taking them with offset -1: both must be kept.
    letters = [DeadLetter(topic="wakeline.inbox", partition=2, offset=-1, key=f"s-{marker}",
                          value=f'{{"n": {n}, "m": "{marker}"}}', reason="expected_seq 3, session is at 5",
                          service="brain") for n in (1, 2)]
    await producer.begin_transaction()
    for letter in letters:
        await producer.send_and_wait(topics.dead_letter, encode(letter), key=letter.key.encode(), partition=2)
    garbage = await producer.send_and_wait(topics.dead_letter, f"garbage {marker}".encode(), key=None, partition=3)
    await producer.commit_transaction()

    rows = await eventually(lambda: _letters(pool, marker, 3), "three dead letters")
    brain = [r for r in rows if r["service"] == "brain"]
    assert sorted(r["value"] for r in brain) == sorted(letter.value for letter in letters)
    assert {(r["topic"], r["partition"], r["offset"]) for r in brain} == {("wakeline.inbox", 2, -1)}
    [unparseable] = [r for r in rows if r["service"] == "archiver"]
    assert unparseable["reason"].startswith("unparseable dead letter")
    assert (unparseable["topic"], unparseable["partition"], unparseable["offset"]) == \
        (topics.dead_letter, 3, garbage.offset)
    assert (unparseable["dl_topic"], unparseable["dl_partition"], unparseable["dl_offset"]) == \
        (topics.dead_letter, 3, garbage.offset)
    offsets = await archived_offsets(pool, settings.archiver_group, topics.dead_letter)
    assert offsets[3] == garbage.offset + 1


async def _letters(pool: TenantPool, marker: str, count: int):
    async with pool.system_transaction() as conn:
        rows = await conn.fetch("SELECT * FROM dead_letters WHERE value LIKE $1", f"%{marker}%")
    return rows if len(rows) >= count else None
