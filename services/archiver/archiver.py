"""`EventArchiver`: one batch of `wakeline.events` records into Postgres.

Decodes every record; a record that is not an event (only the brain writes this topic,
so this means a bug upstream) goes to the dead-letter topic with its reason, and its
offset still counts as done. The events and the batch's offsets are then stored in one
transaction (`store.Archive`). Anything failing there propagates: the caller stops the
service, and nothing of the batch is acknowledged.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from wakeline.codec import DeadLetter, MalformedRecord, dead_letter_for
from wakeline.events import EventBase
from wakeline_archiver.records import RawRecord, decode_event
from wakeline_archiver.rows import next_offsets
from wakeline_archiver.store import Archive

log = logging.getLogger(__name__)
SendDeadLetter = Callable[[DeadLetter, bytes | None, int], Awaitable[None]]


class EventArchiver:
    def __init__(self, archive: Archive, send_dead_letter: SendDeadLetter):
        self._archive = archive
        self._send_dead_letter = send_dead_letter
        self.archived = 0
        self.redelivered = 0
        self.rejected = 0

    async def archive(self, records: Sequence[RawRecord]) -> None:
        events: list[EventBase] = []
        for record in records:
            try:
                events.append(decode_event(record.value))
            except MalformedRecord as bad:
                await self._reject(record, bad.reason)
        offsets = next_offsets((r.topic, r.partition, r.offset) for r in records)
        stored = await self._archive.store_events(events, offsets)
        self.archived += stored
        self.redelivered += len(events) - stored

    async def _reject(self, record: RawRecord, reason: str) -> None:
        log.error("malformed record on %s[%s]@%s: %s; sent to the dead-letter topic",
                  record.topic, record.partition, record.offset, reason)
        letter = dead_letter_for(record.topic, record.partition, record.offset, record.key, record.value,
                                 reason, "archiver")
        await self._send_dead_letter(letter, record.key, record.partition)
        self.rejected += 1
