"""Parked sessions: the `archiver_quarantine` table (migration 0010) and the `Parked` value.

A session is parked from the first seq the archive could not store; from then on its
events are dead-lettered, never stored above the gap, and the rows say why to a
restarted archiver and to an operator. Parking and the batch's offsets commit in one
transaction, after the records set aside were sent to the dead-letter topic, so a crash
in between re-reads the batch and parks again (a no-op), never skips it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from wakeline.storage.pg import TenantPool
from wakeline_archiver.records import SessionKey, without_nul
from wakeline_archiver.store import save_offsets

MAX_REASON = 2_000
PARKED = """
SELECT q.tenant, q.session_id, q.from_seq, q.reason, q.topic, q.partition, q."offset"
FROM archiver_quarantine AS q JOIN unnest($1::text[], $2::text[]) AS b(tenant, session_id) USING (tenant, session_id)
"""
PARK = """
INSERT INTO archiver_quarantine (tenant, session_id, from_seq, reason, topic, partition, "offset", consumer_group)
SELECT *, $8::text FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::int[], $7::bigint[])
ON CONFLICT (tenant, session_id) DO NOTHING
"""


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
    def __init__(self, pool: TenantPool, group: str):
        self._pool = pool
        self._group = group

    async def find(self, sessions: Iterable[SessionKey]) -> dict[SessionKey, Parked]:
        keys = sorted(set(sessions))
        if not keys:
            return {}
        async with self._pool.system_transaction() as conn:
            rows = await conn.fetch(PARKED, [k.tenant for k in keys], [k.session_id for k in keys])
        return {SessionKey(r["tenant"], r["session_id"]): Parked(
            SessionKey(r["tenant"], r["session_id"]), r["from_seq"], r["reason"], r["topic"], r["partition"],
            r["offset"]) for r in rows}

    async def park(self, parked: Sequence[Parked], offsets: dict[tuple[str, int], int]) -> None:
        """Records newly parked sessions and moves the offsets past the batch, in one transaction."""
        async with self._pool.system_transaction() as conn:
            if parked:
                columns = zip(*((p.session.tenant, p.session.session_id, p.from_seq, bounded_reason(p.reason),
                                 p.topic, p.partition, p.offset) for p in parked))
                await conn.execute(PARK, *columns, self._group)
            await save_offsets(conn, self._group, offsets)
