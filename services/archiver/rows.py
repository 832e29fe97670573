"""Pure pieces of the archiver's writes; no I/O here.

`project_sessions`: the `sessions` rows a batch moves forward, through
`wakeline.status.advance`; `next_offsets`: the Kafka positions it stores. The SQL lives
in `store.py`, the events-row mapping in `wakeline.event_store`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from wakeline.events import Event
from wakeline.status import NoSessionRow, SessionRow, advance


def project_sessions(current: Mapping[str, SessionRow], events: Iterable[Event]) -> list[SessionRow]:
    """The `sessions` rows `events` (in seq order per session) move forward, from the
    `current` rows by session id; sessions they leave as they were are not returned."""
    rows: dict[str, SessionRow] = {}
    for event in events:
        row = rows.get(event.session_id) or current.get(event.session_id)
        if row is not None and event.seq <= row.last_seq:
            continue  # forward only: a redelivered or older event never regresses the row
        try:
            rows[event.session_id] = advance(row, event)
        except NoSessionRow:
            continue  # no session_created archived for it: only that event opens a row
    return list(rows.values())


def next_offsets(positions: Iterable[tuple[str, int, int]]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> one past the highest offset seen, from (topic, partition, offset)."""
    result: dict[tuple[str, int], int] = {}
    for topic, partition, offset in positions:
        result[topic, partition] = max(result.get((topic, partition), 0), offset + 1)
    return result
