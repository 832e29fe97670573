"""Who owned which brain partition when, read from the brains' logs; the longest gap.

A partition is served by a brain incarnation while the group has assigned it to that
brain (aiokafka logs `Setting newly assigned partitions {..}` after each rebalance and
`Revoking previously assigned partitions {..}` before one: nothing is consumed in
between) and the brain holds its writer (`brain <host> owns partitions [..]`, logged once
the writer has fenced the previous owner; `writer lost` drops it). A kill -9 ends an
incarnation at the moment of the kill. Pure: lines and times in, figures out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

_TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
_OWNS = re.compile(r"brain \S+ owns partitions \[([\d, ]*)\]")
_ASSIGNED = re.compile(r"Setting newly assigned partitions (.*) for group")
_REVOKING = re.compile(r"Revoking previously assigned partitions (.*) for group")
_LOST = re.compile(r"partition (\d+): writer lost")
_PARTITION = re.compile(r"topic='[^']*\.inbox', partition=(\d+)")  # any topic prefix


@dataclass(frozen=True)
class Change:
    at: float                  # unix time
    holder: str                # one process incarnation
    held: frozenset[int]       # partitions it has a writer for
    owned: frozenset[int]      # ... and is consuming: the partitions it serves


def log_time(line: str) -> float | None:
    match = _TS.match(line)
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() if match else None


def changes_from_log(holder: str, lines: list[str], ended_at: float | None) -> list[Change]:
    """The ownership changes one brain incarnation logged; nothing from `ended_at` (its kill) on."""
    out: list[Change] = []
    assigned: frozenset[int] = frozenset()
    held: frozenset[int] = frozenset()
    for line in lines:
        at = log_time(line)
        if at is None or (ended_at is not None and at > ended_at):
            continue
        if match := _OWNS.search(line):
            held = frozenset(int(p) for p in match.group(1).replace(" ", "").split(",") if p)
        elif match := _ASSIGNED.search(line):
            assigned = frozenset(int(p) for p in _PARTITION.findall(match.group(1)))
            held = held & assigned
        elif match := _REVOKING.search(line):
            assigned = assigned - {int(p) for p in _PARTITION.findall(match.group(1))}
        elif match := _LOST.search(line):
            held = held - {int(match.group(1))}
        else:
            continue
        out.append(Change(at, holder, held, held & assigned))
    if ended_at is not None:
        out.append(Change(ended_at, holder, frozenset(), frozenset()))
    return out


def held_at(changes: list[Change], holder: str, at: float) -> frozenset[int]:
    """The partitions `holder` had a writer for at `at`: the ones its death leaves behind."""
    held: frozenset[int] = frozenset()
    for change in sorted(changes, key=lambda c: c.at):
        if change.at > at:
            break
        if change.holder == holder:
            held = change.held
    return held


def longest_unowned(changes: list[Change], partitions: int, start: float, end: float) -> dict[int, float]:
    """For each partition, the longest time within [start, end] that no incarnation owned it."""
    holders: dict[str, frozenset[int]] = {}
    since: dict[int, float] = {}
    longest = {p: 0.0 for p in range(partitions)}
    timeline = sorted(changes, key=lambda c: c.at)
    for change in timeline:
        if change.at <= start:
            holders[change.holder] = change.owned
    for p in range(partitions):
        if not any(p in owned for owned in holders.values()):
            since[p] = start
    for change in (c for c in timeline if start < c.at <= end):
        holders[change.holder] = change.owned
        owners = {p for owned in holders.values() for p in owned}
        for p in range(partitions):
            if p not in owners and p not in since:
                since[p] = change.at
            elif p in owners and p in since:
                longest[p] = max(longest[p], change.at - since.pop(p))
    for p, began in since.items():
        longest[p] = max(longest[p], end - began)
    return longest
