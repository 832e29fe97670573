"""`python -m wakeline_archiver` killed with SIGKILL mid-stream and restarted: every event exactly once.

The archiver runs as a process on the real topics, with its own consumer group whose
offsets are seeded at the topics' current ends; sessions are produced while it runs,
it is killed as soon as archiving is under way, and a second process takes over.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest_pg import fresh_tenant
from archiver_harness import (
    Session, archived_offsets, archiver_settings, brain_producer, created, eventually, produce, require_stack,
    seed_offsets_at_end, turn,
)
from wakeline.log.chain import first_broken_seq
from wakeline.storage.pg import TenantPool
from wakeline.contract.topics import DEAD_LETTER, EVENTS

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]
SESSIONS, TURNS = 12, 3  # 1 + 6 * TURNS = 19 events each, 228 in all


def start_archiver(settings, log: Path) -> subprocess.Popen:
    env = {**os.environ, "WAKELINE_ARCHIVER_GROUP": settings.archiver_group,
           "WAKELINE_ARCHIVER_DATA_DIR": str(settings.archiver_data_dir),
           "WAKELINE_ARCHIVER_BATCH_SIZE": "20", "WAKELINE_ARCHIVER_SESSION_TIMEOUT_S": "6",
           "WAKELINE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
           "WAKELINE_POSTGRES_DSN": settings.postgres_dsn, "WAKELINE_PARTITIONS": str(settings.partitions)}
    return subprocess.Popen([sys.executable, "-m", "wakeline_archiver"], env=env,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)


async def test_archiver_killed_mid_batch_and_restarted_stores_every_event_exactly_once(tmp_path) -> None:
    # Other archivers (other groups) may share the real topics and tables: progress is
    # judged by this group's stored offsets, exactly-once by the rows themselves.
    settings = archiver_settings(tmp_path)
    await require_stack(settings)
    tenant, log = fresh_tenant(), tmp_path / "archiver.log"
    sessions = [Session(tenant=tenant) for _ in range(SESSIONS)]
    produced: dict[int, int] = {}
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            brain_producer(settings) as producer:
        await seed_offsets_at_end(settings, pool, EVENTS, DEAD_LETTER)
        seeded = await archived_offsets(pool, settings.archiver_group, EVENTS)
        first = start_archiver(settings, log)
        second = None
        try:
            async def write_all() -> None:
                for session in sessions:
                    for drafts in [[created()]] + [turn(n) for n in range(1, TURNS + 1)]:
                        sent = await produce(producer, settings, EVENTS, session.seal(drafts))
                        for partition, after in sent.items():
                            produced[partition] = max(produced.get(partition, 0), after)
            writer = asyncio.create_task(write_all())

            await eventually(lambda: _moved_past(pool, settings, seeded), "the first archiver to store a batch",
                             timeout=60, every=0.02, failed=lambda: first.poll())
            first.send_signal(signal.SIGKILL)
            assert first.wait(10) == -signal.SIGKILL

            second = start_archiver(settings, log)
            await writer
            await eventually(lambda: _moved_past(pool, settings, produced, every_partition=True),
                             "the second archiver to store everything produced", timeout=90,
                             failed=lambda: second.poll())
            for session in sessions:
                async with pool.transaction(tenant) as conn:
                    rows = await conn.fetch("SELECT seq, encode(hash, 'hex') AS hash FROM events "
                                            "WHERE session_id = $1 ORDER BY seq", session.session_id)
                    keys = await conn.fetchval("SELECT count(*) FROM event_keys WHERE session_id = $1",
                                               session.session_id)
                assert [(r["seq"], r["hash"]) for r in rows] == [(e.seq, e.hash) for e in session.events]
                assert keys == len(session.events)
                assert first_broken_seq(session.events) is None

            second.send_signal(signal.SIGTERM)
            assert second.wait(30) == 0, "SIGTERM should stop the archiver cleanly"
        except BaseException:
            print(log.read_text(errors="replace")[-6000:])
            raise
        finally:
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait()


async def _moved_past(pool: TenantPool, settings, offsets: dict[int, int], every_partition: bool = False) -> bool:
    stored = await archived_offsets(pool, settings.archiver_group, EVENTS)
    past = [stored.get(p, 0) >= at if every_partition else stored.get(p, 0) > at for p, at in offsets.items()]
    return all(past) if every_partition else any(past)
