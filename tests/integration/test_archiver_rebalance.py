"""Two archivers in one group share the partitions; either may leave; every event lands once."""

from __future__ import annotations

import asyncio

import pytest

from conftest_pg import fresh_tenant
from archiver_harness import (
    InProcessArchiver, Session, archived_offsets, archiver_settings, brain_producer, created, eventually,
    private_topics, produce, require_stack, stored_events, turn,
)
from wakeline.log.chain import first_broken_seq
from wakeline.storage.pg import TenantPool

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


async def test_archivers_joining_and_leaving_the_group_store_every_event_exactly_once(tmp_path) -> None:
    settings = archiver_settings(tmp_path, archiver_session_timeout_s=6.0)
    await require_stack(settings)
    tenant = fresh_tenant()
    sessions = [Session(tenant=tenant) for _ in range(12)]
    produced: dict[int, int] = {}
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            private_topics(settings) as topics, brain_producer(settings) as producer:
        async def write(turns: range) -> None:
            for n in turns:
                for session in sessions:
                    drafts = ([created()] if n == 1 else []) + turn(n)
                    for partition, after in (await produce(producer, settings, topics.events,
                                                           session.seal(drafts))).items():
                        produced[partition] = max(produced.get(partition, 0), after)
                await asyncio.sleep(0.2)

        first = InProcessArchiver(settings, topics)
        second = InProcessArchiver(settings.model_copy(update={"archiver_data_dir": tmp_path / "second"}), topics)
        try:
            await write(range(1, 4))             # while the second joins and the group rebalances
            await first.stopped()                # leaves: its partitions go to the second
            await write(range(4, 6))
            await eventually(lambda: _caught_up(pool, settings.archiver_group, topics.events, produced),
                             "the remaining archiver to store everything", timeout=60,
                             failed=lambda: second.task.done() and second.task.exception())
            assert first.task.exception() is None and not second.task.done()
        finally:
            for archiver in (first, second):
                if not archiver.task.done():
                    await archiver.stopped()
        for session in sessions:
            stored = await stored_events(pool, session)
            assert stored == session.events and first_broken_seq(stored) is None


async def _caught_up(pool: TenantPool, group: str, topic: str, produced: dict[int, int]) -> bool:
    stored = await archived_offsets(pool, group, topic)
    return all(stored.get(p, 0) >= at for p, at in produced.items())
