"""The archiver's Kafka consumer as faust builds it for the fetch loop: read committed, and
the fetch wait from the archiver's settings instead of faust's fixed 1.5 s (behind a backlog
that wait idled every lane: `ArchiverSettings.archiver_fetch_max_wait_ms`). Built, never
started: no broker is needed to read what it was given."""

from __future__ import annotations

from typing import Any

import pytest

from wakeline_archiver.gate import BatchGate
from wakeline_archiver.settings import ArchiverSettings
from wakeline_archiver.stream import ArchivedTopics, Handler, build_app


async def _nothing(*_: Any) -> Any:
    return {}


def _worker_consumer(settings: ArchiverSettings) -> Any:
    handler = Handler(prepare=lambda records: records, store=_nothing)
    app, _ = build_app(settings, topics=ArchivedTopics(), events=handler, dead_letters=handler,
                       gate=BatchGate(), stored_positions=_nothing)
    thread = app.consumer._new_consumer_thread()
    return thread._create_worker_consumer(app.transport)


@pytest.mark.parametrize("wait_ms", [100, 7, 1500])
async def test_the_fetch_loops_consumer_reads_committed_and_waits_what_the_settings_say(wait_ms: int) -> None:
    consumer = _worker_consumer(ArchiverSettings(archiver_fetch_max_wait_ms=wait_ms,
                                                 kafka_security_protocol="PLAINTEXT"))
    assert consumer._isolation_level == "read_committed"
    assert consumer._fetch_max_wait_ms == wait_ms


def test_the_default_wait_is_short_of_fausts() -> None:
    assert ArchiverSettings(kafka_security_protocol="PLAINTEXT").archiver_fetch_max_wait_ms == 100
