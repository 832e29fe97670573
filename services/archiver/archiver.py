"""`EventArchiver`: one batch of `wakeline.events` records into Postgres.

Every record is decoded and checked (`records`, `bounds`); the batch is sorted
(`triage`) into events to store and records to set aside: unreadable ones, and those of
sessions already parked (`quarantine`). The events are stored, the whole batch in one
transaction with its offsets when it can be, else session by session (`isolation`): a
session whose events cannot be stored (a conflicting history, a broken chain, a row the
database refuses, a session id another tenant holds) is parked from the first event
that failed. Records set aside go to the dead-letter topic with their reason, newly
parked sessions are logged CRITICAL and recorded, and the offsets move past the batch.
Nothing about one session stops the others. Weather propagates: the gate retries.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

from wakeline.contract.codec import DeadLetter, dead_letter_for
from wakeline.storage.event_store import EventStore
from wakeline_archiver.isolation import Outcome, SessionFailure, store_isolating
from wakeline_archiver.quarantine import Parked, Quarantine
from wakeline_archiver.records import RawRecord
from wakeline_archiver.offsets import next_offsets
from wakeline_archiver.triage import (
    HELD, Decoded, SetAside, Triage, decode_all, held_reason, sessions_named, triage,
)

log = logging.getLogger(__name__)
SendDeadLetter = Callable[[DeadLetter, bytes | None, int], Awaitable[None]]


class EventArchiver:
    def __init__(self, store: EventStore, group: str, quarantine: Quarantine, send_dead_letter: SendDeadLetter):
        self._archive = partial(store.archive, group)  # a batch and its offsets, in one transaction
        self._quarantine = quarantine
        self._send_dead_letter = send_dead_letter
        self.archived = 0
        self.redelivered = 0
        self.rejected = 0  # records set aside (dead-lettered)
        self.parked = 0    # sessions parked by this archiver

    async def archive(self, records: Sequence[RawRecord]) -> None:
        await self.archive_decoded(decode_all(records))

    async def archive_decoded(self, decoded: Sequence[Decoded]) -> None:
        """`archive` after `triage.decode_all`, which the stream runs ahead, while the previous batch is stored."""
        records = [record for record, _ in decoded]
        sorted_ = triage(decoded, await self._quarantine.find(sessions_named(decoded)))
        offsets = next_offsets((r.topic, r.partition, r.offset) for r in records)
        clean = not sorted_.set_aside
        outcome = await store_isolating(sorted_.to_store, self._archive, offsets if clean else {})
        self.archived += outcome.stored
        self.redelivered += len(sorted_.to_store) - outcome.stored - sum(len(f.pairs) for f in outcome.failures)
        if not (clean and outcome.together):
            await self._set_aside(sorted_, outcome, offsets)

    async def _set_aside(self, sorted_: Triage, outcome: Outcome, offsets: dict[tuple[str, int], int]) -> None:
        """Dead letters first, then parking and offsets together: a crash in between repeats, never skips."""
        parked = sorted_.parked + [_parked_by(f) for f in outcome.failures]
        aside = sorted_.set_aside + [a for f in outcome.failures for a in _set_aside_by(f)]
        for item in aside:
            await self._dead_letter(item)
        _log_held([item for item in aside if item.reason.startswith(HELD)])
        await self._quarantine.park(parked, offsets)
        for p in parked:
            log.critical("ALERT session %s of tenant %s parked from seq %s: %s; its events from there on go to "
                         "the dead-letter topic, every other session is still archived",
                         p.session.session_id, p.session.tenant, p.from_seq, p.reason)
        self.parked += len(parked)

    async def _dead_letter(self, item: SetAside) -> None:
        record = item.record
        if not item.reason.startswith(HELD):  # held ones: one line per batch, see _log_held
            log.error("record %s[%s]@%s set aside, sent to the dead-letter topic: %s",
                      record.topic, record.partition, record.offset, item.reason[:500])
        letter = dead_letter_for(record.topic, record.partition, record.offset, record.key, record.value,
                                 item.reason, "archiver")
        await self._send_dead_letter(letter, record.key, record.partition)
        self.rejected += 1


def _parked_by(failure: SessionFailure) -> Parked:
    record, event = failure.pairs[0]
    return Parked(failure.session, event.seq, failure.reason, record.topic, record.partition, record.offset)


def _set_aside_by(failure: SessionFailure) -> list[SetAside]:
    first = SetAside(failure.pairs[0][0], failure.reason)
    later = held_reason(_parked_by(failure))
    return [first] + [SetAside(record, later) for record, _ in failure.pairs[1:]]


def _log_held(held: list[SetAside]) -> None:
    """A parked session that keeps talking costs one line per batch, not one per event."""
    if held:
        keys = sorted({(r.record.key or b"").decode("utf-8", "replace")[:80] for r in held})
        log.warning("%d later records of parked sessions sent to the dead-letter topic (sessions %s%s)",
                    len(held), ", ".join(keys[:5]), ", ..." if len(keys) > 5 else "")
