"""A Postgres restart under load is weather: the archiver waits it out and loses or doubles nothing.

Restarts a cluster of its own (`tests.private_postgres`: pg.sh on a free port, migrated),
never the stack's, whose restart would also cut off the demo's services; it brings the
cluster back up whatever happens. Sessions keep being written to Kafka throughout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from archiver_harness import (
    Session, archived_all, archiver_settings, brain_producer, created, dead_letters_for, eventually, parked_row,
    private_topics, produce, require_stack, running_archiver, stored_events, turn,
)
from tests.private_postgres import PrivatePostgres, private_postgres_in_environ
from wakeline.storage.pg import TenantPool

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]
SESSIONS = 12


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[PrivatePostgres]:
    with private_postgres_in_environ(tmp_path / "postgres") as cluster:
        yield cluster


async def restart_postgres(cluster: PrivatePostgres, down_for: float = 1.0) -> None:
    try:
        await asyncio.to_thread(cluster.command, "down")
        await asyncio.sleep(down_for)
    finally:
        await asyncio.to_thread(cluster.command, "up")


async def keep_writing(producer, settings, topic: str, sessions: list[Session], until: asyncio.Event) -> int:
    """One turn per session per round, until `until` is set and two more rounds are written."""
    rounds, extra = 0, 2
    while extra:
        rounds += 1
        for session in sessions:
            await produce(producer, settings, topic, session.seal(turn(rounds)))
        extra -= until.is_set()
        await asyncio.sleep(0.2)
    return rounds


async def test_postgres_restart_under_load_loses_and_doubles_nothing_and_the_archiver_carries_on(
        cluster: PrivatePostgres, tmp_path: Path) -> None:
    settings = archiver_settings(tmp_path)  # built in the cluster's environment: its DSN is the cluster's
    assert f":{cluster.port}/" in settings.postgres_dsn
    await require_stack(settings)
    sessions = [Session() for _ in range(SESSIONS)]
    restarted = asyncio.Event()
    async with private_topics(settings) as topics, brain_producer(settings) as producer, \
            running_archiver(settings, topics) as archiver:
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
            for session in sessions:
                await produce(producer, settings, topics.events, session.seal([created()]))
            await eventually(lambda: archived_all(pool, sessions), "the sessions' first events")
        load = asyncio.create_task(keep_writing(producer, settings, topics.events, sessions, restarted))
        await asyncio.sleep(0.5)
        try:
            await restart_postgres(cluster)
        finally:
            restarted.set()
            rounds = await load

        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
            await eventually(lambda: archived_all(pool, sessions), "every session, whole, after the restart",
                             timeout=90, failed=lambda: archiver.task.done() and archiver.task.exception())
            assert not archiver.task.done()
            for session in sessions:
                assert [e.seq for e in await stored_events(pool, session)] == list(range(1, 1 + 6 * rounds + 1))
                assert await parked_row(pool, session) is None
                assert await dead_letters_for(pool, topics.dead_letter, session.session_id) == []
        assert rounds >= 3 and len(sessions) == SESSIONS
