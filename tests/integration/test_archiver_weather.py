"""A Postgres restart under load is weather: the archiver waits it out and loses or doubles nothing.

Restarts the cluster the test suite uses (deploy/postgres/pg.sh with the same
environment), so it only runs where pg.sh manages the database the DSN names; it brings
the cluster back up whatever happens. Sessions keep being written to Kafka throughout.
"""

from __future__ import annotations

import asyncio
import subprocess
from urllib.parse import urlparse

import pytest

from conftest_pg import PG_SH
from archiver_harness import (
    Session, archived_all, archiver_settings, brain_producer, created, dead_letters_for, eventually, parked_row,
    private_topics, produce, require_stack, running_archiver, stored_events, turn,
)
from tests.requirements import require
from wakeline.pg import TenantPool

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]
SESSIONS = 12


def require_local_cluster(dsn: str) -> None:
    """pg.sh must run the cluster the DSN points at: restarting any other would test nothing."""
    status = subprocess.run(["bash", str(PG_SH), "status"], capture_output=True, text=True)
    fields = dict(line.split("=", 1) for line in status.stdout.splitlines() if "=" in line)
    require(fields.get("state") == "running" and fields.get("port") == str(urlparse(dsn).port),
            f"pg.sh does not run the cluster at {urlparse(dsn).port}: {status.stdout!r}")


async def pg_sh(command: str) -> None:
    proc = await asyncio.create_subprocess_exec("bash", str(PG_SH), command, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    assert proc.returncode == 0, f"pg.sh {command} failed: {out.decode(errors='replace')}"


async def restart_postgres(down_for: float = 1.0) -> None:
    try:
        await pg_sh("down")
        await asyncio.sleep(down_for)
    finally:
        await pg_sh("up")


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


async def test_postgres_restart_under_load_loses_and_doubles_nothing_and_the_archiver_carries_on(tmp_path) -> None:
    settings = archiver_settings(tmp_path)
    await require_stack(settings)
    require_local_cluster(settings.postgres_dsn)
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
            await restart_postgres()
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
