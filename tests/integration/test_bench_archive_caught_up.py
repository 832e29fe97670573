"""`bench.harness.archive_caught_up`, which `make bench` waits on before its first figure: it
returns only once the archive holds every committed event, and fails, naming the lag, when
the archiver never gets there."""

from __future__ import annotations

import pytest

from archiver_harness import (
    Session, archiver_settings, brain_producer, created, draft, private_topics, produce, require_stack,
    running_archiver,
)
from bench.harness import archive_caught_up

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


async def test_it_waits_for_the_archiver_and_fails_naming_the_lag_without_one(tmp_path) -> None:
    settings = archiver_settings(tmp_path)
    await require_stack(settings)
    session = Session()
    async with private_topics(settings) as topics, brain_producer(settings) as producer:
        await produce(producer, settings, topics.events, session.seal([created()]))
        await produce(producer, settings, topics.events,
                      session.seal([draft("user_message", text=f"m{n}") for n in range(4)]))

        with pytest.raises(RuntimeError, match="trails the events topic by 5 events"):
            await archive_caught_up(timeout_s=1.0, topic=topics.events, group=settings.archiver_group)

        async with running_archiver(settings, topics):
            line = await archive_caught_up(timeout_s=60.0, topic=topics.events, group=settings.archiver_group)
        assert line["bench"] == "archive_caught_up"
        assert 0 <= line["lag_at_start"] <= 5 and line["waited_s"] >= 0
        # and once caught up, at once: nothing left to wait for
        again = await archive_caught_up(timeout_s=1.0, topic=topics.events, group=settings.archiver_group)
        assert again["lag_at_start"] == 0
