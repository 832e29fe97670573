"""Records keep arriving while archivers join and leave the group again and again; every
event lands once, no session is parked, and the stored offsets never run past an event
the archive does not hold.

The rebalances land at arbitrary points of the fetch loop: between a fetch and its batch,
inside a batch window, while a batch commits. The archiver once dropped the first fetch
after a rebalance whose window straddled the new generation (the partitions' seek to the
archive's offsets had already happened), so the next batch stored offsets past events
it never stored, and the sessions were parked with "seq n-1 is not archived" (make chaos
run 9). A short batch window makes the straddle likely.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from conftest_pg import fresh_tenant
from archiver_harness import (
    InProcessArchiver, Session, archived_offsets, archiver_settings, brain_producer, created, eventually,
    parked_row, private_topics, produce, require_stack, stored_events, turn,
)
from wakeline.log.chain import first_broken_seq
from wakeline.storage.pg import TenantPool

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]
CYCLES = 5


async def test_archivers_churning_under_load_store_every_event_and_park_nothing(tmp_path) -> None:
    settings = archiver_settings(tmp_path, archiver_session_timeout_s=6.0, archiver_batch_window_s=0.02,
                                 archiver_batch_size=50)
    await require_stack(settings)
    tenant = fresh_tenant()
    sessions = [Session(tenant=tenant) for _ in range(24)]
    produced: dict[int, int] = {}
    rng = random.Random(7)
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            private_topics(settings) as topics, brain_producer(settings) as producer:
        writing = asyncio.Event()
        writing.set()

        async def write() -> int:
            n = 0
            while writing.is_set():
                n += 1
                for session in sessions:
                    drafts = ([created()] if n == 1 else []) + turn(n)
                    for partition, after in (await produce(producer, settings, topics.events,
                                                           session.seal(drafts))).items():
                        produced[partition] = max(produced.get(partition, 0), after)
                    await asyncio.sleep(0.005)
            return n

        steady = InProcessArchiver(settings, topics)
        writer = asyncio.create_task(write())
        joined: list[InProcessArchiver] = []
        try:
            for cycle in range(CYCLES):
                # Each join and each leave is a rebalance of every member, mid-stream.
                guest = InProcessArchiver(settings.model_copy(
                    update={"archiver_data_dir": tmp_path / f"guest-{cycle}"}), topics)
                joined.append(guest)
                await asyncio.sleep(2.0 + rng.random() * 2.0)
                await guest.stopped()
                await asyncio.sleep(1.0 + rng.random())
            writing.clear()
            turns = await writer
            await eventually(lambda: _caught_up(pool, settings.archiver_group, topics.events, produced),
                             "the remaining archiver to store everything", timeout=90,
                             failed=lambda: steady.task.done() and steady.task.exception())
            assert not steady.task.done()
            assert all(g.task.exception() is None for g in joined)
        finally:
            writing.clear()
            if not writer.done():
                writer.cancel()
            for archiver in (steady, *joined):
                if not archiver.task.done():
                    await archiver.stopped()
        assert turns >= 5, f"only {turns} turns written: the churn ran over too little traffic to prove anything"
        for session in sessions:
            assert await parked_row(pool, session) is None, f"session {session.session_id} was parked"
            stored = await stored_events(pool, session)
            assert [e.event_id for e in stored] == [e.event_id for e in session.events], \
                f"session {session.session_id}: {len(stored)} of {len(session.events)} events archived"
            assert first_broken_seq(stored) is None


async def _caught_up(pool: TenantPool, group: str, topic: str, produced: dict[int, int]) -> bool:
    stored = await archived_offsets(pool, group, topic)
    return all(stored.get(p, 0) >= at for p, at in produced.items())
