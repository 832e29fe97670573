"""A record the brain marks `ARCHIVE_NOW_HEADER` (a create's, a fork's or a delete's outcome,
which the gateway answers only once Postgres has it) ends the archiver's gathering at once;
anything else waits out the batch window (issue 35: a longer window, fewer transactions).

In-process on private topics, with a window far longer than the test's bounds: if the mark
were ignored, nothing would be archived before the window ran out."""

from __future__ import annotations

import asyncio
import time

import pytest

from archiver_harness import (
    Session, archived_all, archiver_settings, brain_producer, created, draft, eventually, private_topics, produce,
    require_stack, running_archiver, session_row,
)
from wakeline.contract.topics import ARCHIVE_NOW_HEADER
from wakeline.storage.pg import TenantPool

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]
WINDOW_S = 8.0
NOW = ((ARCHIVE_NOW_HEADER, b"1"),)


async def test_a_marked_record_ends_the_window_and_unmarked_ones_wait_it_out(tmp_path) -> None:
    settings = archiver_settings(tmp_path, archiver_batch_window_s=WINDOW_S)
    await require_stack(settings)
    first, plain, marked = Session(), Session(), Session()
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
            private_topics(settings) as topics, brain_producer(settings) as producer, \
            running_archiver(settings, topics):
        # Marked, and alone: archived without the window, once the archiver has its partitions.
        await produce(producer, settings, topics.events, first.seal([created()]), headers=NOW)
        await eventually(lambda: archived_all(pool, [first]), "the first marked record", timeout=WINDOW_S - 1)

        sent = time.monotonic()
        await produce(producer, settings, topics.events, plain.seal([created(), draft("turn_started", turn=1)]))
        await asyncio.sleep(1.5)
        assert await session_row(pool, plain) is None, "unmarked records went before their window ran out"

        # A marked record of another session: the batch being gathered goes now, the plain ones with it.
        await produce(producer, settings, topics.events, marked.seal([created()]), headers=NOW)
        await eventually(lambda: archived_all(pool, [plain, marked]), "the batch the mark ended",
                         timeout=WINDOW_S / 2)
        assert time.monotonic() - sent < WINDOW_S
