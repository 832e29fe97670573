"""Pure pieces of the archiver's writes; no I/O here.

`project_sessions`: the `sessions` rows a batch moves forward, through
`wakeline.log.status.project` (what `advance` does, one session's events at a time);
`next_offsets`: the Kafka positions it stores. The SQL lives in `store.py`, the
events-row mapping in `wakeline.storage.event_store`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from wakeline.contract.events import Event
from wakeline.log.status import SessionRow, project


def project_sessions(current: Mapping[str, SessionRow], events: Iterable[Event]) -> list[SessionRow]:
    """The `sessions` rows `events` (in seq order per session) move forward, from the
    `current` rows by session id; sessions they leave as they were are not returned.
    Forward only: a redelivered or older event never regresses a row, and only a
    `session_created` (or `forked`) opens one (`status.project`)."""
    by_session: dict[str, list[Event]] = {}
    for event in events:
        by_session.setdefault(event.session_id, []).append(event)
    rows = []
    for session_id, its_events in by_session.items():
        before = current.get(session_id)
        row = project(before, its_events)
        if row is not None and row != before:
            rows.append(row)
    return rows


def next_offsets(positions: Iterable[tuple[str, int, int]]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> one past the highest offset seen, from (topic, partition, offset)."""
    result: dict[tuple[str, int], int] = {}
    for topic, partition, offset in positions:
        result[topic, partition] = max(result.get((topic, partition), 0), offset + 1)
    return result
