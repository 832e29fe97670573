"""Parked sessions: the `Parked` value, kept through the store (`archiver_quarantine`, migration 0010).

A session is parked from the first seq the archive could not store; from then on its
events are dead-lettered, never stored above the gap, and the rows say why to a
restarted archiver and to an operator. Parking and the batch's offsets commit in one
transaction, after the records set aside were sent to the dead-letter topic, so a crash
in between re-reads the batch and parks again (a no-op), never skips it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from wakeline.storage.event_store import EventStore, ParkedSession
from wakeline_archiver.records import SessionKey, without_nul

MAX_REASON = 2_000


@dataclass(frozen=True)
class Parked:
    session: SessionKey
    from_seq: int | None  # None: every event of the session is held
    reason: str
    topic: str
    partition: int
    offset: int

    def holds(self, seq: int | None) -> bool:
        """An event at `seq` is held back: it is at or after the first seq not stored."""
        return self.from_seq is None or seq is None or seq >= self.from_seq


def bounded_reason(reason: str) -> str:
    return without_nul(reason[:MAX_REASON]) or ""


class Quarantine:
    def __init__(self, store: EventStore, group: str):
        self._store = store
        self._group = group

    async def find(self, sessions: Iterable[SessionKey]) -> dict[SessionKey, Parked]:
        rows = await self._store.parked((k.tenant, k.session_id) for k in sessions)
        return {SessionKey(r.tenant, r.session_id): Parked(
            SessionKey(r.tenant, r.session_id), r.from_seq, r.reason, r.topic, r.partition, r.offset) for r in rows}

    async def park(self, parked: Sequence[Parked], offsets: dict[tuple[str, int], int]) -> None:
        """Records newly parked sessions and moves the offsets past the batch, in one transaction."""
        rows = [ParkedSession(p.session.tenant, p.session.session_id, p.from_seq, bounded_reason(p.reason),
                              p.topic, p.partition, p.offset) for p in parked]
        await self._store.park(self._group, rows, offsets)
