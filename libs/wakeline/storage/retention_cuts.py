"""Retention cuts as verify sees them: which of a session's absent seqs were dropped on purpose.

Each drop is logged in `retention_log` with every session's last event in the dropped range
(0004); the service role reads its own tenant's share through `retention_cuts()` (0007). A
cut is believed for a session when that head agrees with the session's event_keys tombstone
(same hash, ts inside the range) and no row of the session is left in the range. A seq
absent from `events` is then *retained out*, not missing, when its tombstone's ts lies in a
believed cut's range, at or before its head. Walking the chain across the cut (the first
surviving row must link to the last dropped hash) stays in verify.py; dropping, in retention.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from wakeline.contract.events import Frozen

# What ensure_events_partition (0007) raises for a month that retention dropped.
RETAINED_OUT_SQLSTATE = "WLR01"
_CUTS = "SELECT range_from, range_to, seq, hash FROM retention_cuts($1)"


class Cut(Frozen):
    """One dropped range seen from one session: the session's last event in it."""

    range_from: datetime
    range_to: datetime
    seq: int
    hash: str

    def covers(self, ts: datetime) -> bool:
        return self.range_from <= ts < self.range_to

    def __str__(self) -> str:
        return f"retention cut [{self.range_from.isoformat()}, {self.range_to.isoformat()})"


async def session_cuts(conn: asyncpg.Connection, session_id: str) -> list[Cut]:
    """The cuts naming `session_id`, for the tenant set on `conn` (a TenantPool transaction)."""
    return [Cut(**dict(row)) for row in await conn.fetch(_CUTS, session_id)]


def retained_out(rows: Sequence[Any], cuts: Sequence[Cut]) -> tuple[frozenset[int], list[tuple[int, str]]]:
    """The seqs the believed cuts account for, and (seq, reason) for each cut not believed.

    `rows` are verify's: a session's events rows full-joined with its event_keys rows.
    """
    keys = {row["key_seq"]: row for row in rows if row["key_seq"] is not None}
    believed, problems = [], []
    for cut in cuts:
        found = list(_contradictions(cut, keys.get(cut.seq), rows))
        problems.extend(found)
        if not found:
            believed.append(cut)
    seqs = frozenset(row["at_seq"] for row in rows if row["seq"] is None
                     and any(c.covers(row["key_ts"]) and row["at_seq"] <= c.seq for c in believed))
    return seqs, problems


def _contradictions(cut: Cut, head: Any, rows: Sequence[Any]) -> list[tuple[int, str]]:
    if head is None:
        found = [(cut.seq, f"{cut}: its chain head, seq {cut.seq}, is not registered in event_keys")]
    elif head["key_hash"] != cut.hash or not cut.covers(head["key_ts"]):
        found = [(cut.seq, f"{cut}: its chain head disagrees with event_keys at seq {cut.seq} (hash or ts)")]
    else:
        found = []
    # A dropped partition takes every row in its range with it; one left means no real drop.
    found.extend((row["seq"], f"{cut}: seq {row['seq']} is still in events inside the dropped range")
                 for row in rows if row["seq"] is not None and cut.covers(row["ts"]))
    return found
