"""Where the time goes between a brain's kill and each of its sessions' next event (issue 37).

For every in-flight session of every brain kill, the moments on the way back, read from
the brains' logs and the committed log: the kill; the start of the brain that woke the
session (its replacement, if it was started after the kill); the rebalance that gave that
brain the session's partition (its `(Re-)joining group`, or a heartbeat told the group is
rebalancing); the join's end (`Joined group`: the dead member expired or was replaced);
the assignment (`Setting newly assigned partitions`); the writer ready (`owns partitions`:
the previous owner fenced, its transactions settled, the offsets read); the session's
wake (`woke session .. in T s`, started T before the line) and its first event after the
kill (its `ts`, as the recovery figure counts it). Moments are taken from the waking
brain's log, walking forward from the kill; one that is missing (a brain that kept the
partition has no assignment to wait for) leaves its time to the next phase.
Pure: lines, times and events in, timelines out.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from bench.chaos.figures import in_flight
from bench.chaos.ownership import Change, held_at, log_time
from wakeline.contract.events import Event
from wakeline.contract.topics import partition_for

_PARTITIONS = re.compile(r"topic='[^']*\.inbox', partition=(\d+)")
_OWNS = re.compile(r"brain \S+ owns partitions \[([\d, ]*)\]")
_TAKE = re.compile(r"\(p\d+: fenced in ([\d.]+) s, settled in ([\d.]+) s, offsets in ([\d.]+) s\)")
_WOKE = re.compile(r"woke session (\S+) at seq \d+ in ([\d.]+) s")
_REBALANCE = re.compile(r"\(Re-\)joining group|Heartbeat failed for group \S+ because it is rebalancing")
_JOINED = re.compile(r"Joined group '[^']*' \(generation (\d+)\)")
_ASSIGNED = re.compile(r"Setting newly assigned partitions (.*) for group")

# The moments in the order a recovery passes them; each phase is named for the moment it ends at.
MOMENTS = ("killed", "started", "rebalance", "joined", "assigned", "writer_ready", "wake_started", "first_event")
PHASES = MOMENTS[1:]


@dataclass(frozen=True)
class Mark:
    at: float
    kind: str                     # rebalance | joined | assigned | owns | woke
    partitions: frozenset[int] = frozenset()
    session_id: str = ""
    seconds: float = 0.0          # a wake's own duration
    take: tuple[float, ...] = ()  # a writer's: seconds to fence, to settle, to read the offsets


@dataclass
class BrainLog:
    """One brain incarnation's log, reduced to the marks a timeline needs."""

    name: str
    started: float | None
    marks: list[Mark] = field(default_factory=list)     # all but the wakes
    wakes: dict[str, list[Mark]] = field(default_factory=dict)  # by session: thousands in a run

    @classmethod
    def parse(cls, name: str, lines: list[str]) -> "BrainLog":
        out = cls(name, None)
        for line in lines:
            at = log_time(line)
            if at is None:
                continue
            if out.started is None:
                out.started = at
            if mark := _mark(at, line):
                if mark.kind == "woke":
                    out.wakes.setdefault(mark.session_id, []).append(mark)
                else:
                    out.marks.append(mark)
        return out

    def first_wake(self, session_id: str, after: float) -> Mark | None:
        return next((m for m in self.wakes.get(session_id, ()) if m.at > after), None)

    def first(self, kind: str, after: float, until: float = float("inf"), partition: int | None = None) -> Mark | None:
        return next((m for m in self.marks if m.kind == kind and after < m.at <= until
                     and (partition is None or partition in m.partitions)), None)

    def last(self, kind: str, until: float) -> Mark | None:
        return next((m for m in reversed(self.marks) if m.kind == kind and m.at <= until), None)


def _mark(at: float, line: str) -> Mark | None:
    if match := _WOKE.search(line):
        return Mark(at, "woke", session_id=match.group(1), seconds=float(match.group(2)))
    if match := _OWNS.search(line):
        take = tuple(float(s) for s in found.groups()) if (found := _TAKE.search(line)) else ()
        return Mark(at, "owns", frozenset(int(p) for p in match.group(1).replace(" ", "").split(",") if p), take=take)
    if match := _ASSIGNED.search(line):
        return Mark(at, "assigned", frozenset(int(p) for p in _PARTITIONS.findall(match.group(1))))
    if _JOINED.search(line):
        return Mark(at, "joined")
    if _REBALANCE.search(line):
        return Mark(at, "rebalance")
    return None


@dataclass(frozen=True)
class Timeline:
    session_id: str
    partition: int
    kind: str                      # affected (the killed brain held its partition) or survivors
    killed: str                    # the incarnation killed
    waker: str | None              # the incarnation that woke the session after the kill
    waiting_for: str               # the session's last event type before the kill
    moments: dict[str, float | None]
    take: tuple[float, ...] = ()   # the waker's writer: seconds to fence, settle, read offsets

    @property
    def total_s(self) -> float | None:
        first = self.moments["first_event"]
        return None if first is None else first - self.killed_at

    @property
    def killed_at(self) -> float:
        at = self.moments["killed"]
        assert at is not None
        return at

    def phases(self) -> dict[str, float | None]:
        """Seconds per phase; a missing moment's time is counted in the next present one."""
        out: dict[str, float | None] = {}
        previous = self.killed_at
        for phase in PHASES:
            at = self.moments[phase]
            if at is None:
                out[phase] = None
                continue
            at = max(at, previous)  # logged out of order (a line's ms against an event's ts): no negative phase
            out[phase] = round(at - previous, 3)
            previous = at
        return out

    def as_row(self) -> dict:
        """Seconds after the kill of each moment, and the phases: the JSON the run prints."""
        return {"session_id": self.session_id, "partition": self.partition, "kind": self.kind, "killed": self.killed,
                "waker": self.waker, "waiting_for": self.waiting_for, "total_s": _round(self.total_s),
                "writer_fenced_settled_offsets_s": list(self.take),
                "after_kill_s": {m: _round(None if at is None else at - self.killed_at)
                                 for m, at in self.moments.items() if m != "killed"},
                "phases_s": self.phases()}


def recovery_timelines(kills: list[tuple[float, str]], changes: list[Change], logged: dict[str, list[Event]],
                       partitions: int, logs: list[BrainLog]) -> list[Timeline]:
    """A timeline for every session in flight at every brain kill, as `figures.recovery_after_brain_kills`
    counts them: affected when the killed incarnation held its partition, survivors otherwise."""
    out = []
    for killed_at, holder in kills:
        owned = held_at(changes, holder, killed_at - 1e-3)
        for sid, events in logged.items():
            if in_flight(events, killed_at):
                partition = partition_for(sid, partitions)
                kind = "affected" if partition in owned else "survivors"
                out.append(session_timeline(sid, partition, kind, holder, killed_at, events, logs))
    return out


def session_timeline(session_id: str, partition: int, kind: str, killed: str, killed_at: float,
                     events: list[Event], logs: list[BrainLog]) -> Timeline:
    """The moments of one session's recovery from one kill (`logs`: every brain incarnation's)."""
    before = [e for e in events if e.ts.timestamp() <= killed_at]
    after = [e.ts.timestamp() for e in events if e.ts.timestamp() > killed_at]
    first_event = min(after) if after else None
    moments: dict[str, float | None] = dict.fromkeys(MOMENTS)
    moments["killed"], moments["first_event"] = killed_at, first_event
    waker, wake = _waker(session_id, killed, killed_at, first_event, logs)
    take: tuple[float, ...] = ()
    if waker is not None and wake is not None:
        moments["wake_started"] = wake.at - wake.seconds
        way, ready = _way_to(waker, partition, killed_at, wake.at - wake.seconds)
        moments.update(way)
        take = ready.take if ready else ()
    return Timeline(session_id, partition, kind, killed, waker.name if waker else None,
                    before[-1].type if before else "", moments, take)


def _waker(session_id: str, killed: str, killed_at: float, first_event: float | None,
           logs: list[BrainLog]) -> tuple[BrainLog | None, Mark | None]:
    """The first wake of the session after the kill that began before its first event
    (a later one is an eviction's, not this recovery's)."""
    until = float("inf") if first_event is None else first_event
    wakes = [(m, b) for b in logs if b.name != killed
             for m in [b.first_wake(session_id, killed_at)] if m and m.at - m.seconds <= until]
    if not wakes:
        return None, None
    mark, brain = min(wakes, key=lambda w: w[0].at)
    return brain, mark


def _way_to(brain: BrainLog, partition: int, killed_at: float,
            wake_started: float) -> tuple[dict[str, float | None], Mark | None]:
    """From the waking brain's log: how the partition came to it after the kill, and its writer's mark."""
    moments: dict[str, float | None] = {}
    if brain.started is not None and brain.started > killed_at:
        moments["started"] = brain.started
    assigned = brain.first("assigned", killed_at, wake_started, partition=partition)
    if assigned is None:
        return moments, None  # it held the partition through the kill: nothing to wait for but the input
    moments["assigned"] = assigned.at
    # A join or rebalance from before the kill (one under way for an earlier kill) counts from the kill.
    joined = brain.last("joined", assigned.at)
    if joined is not None:
        moments["joined"] = max(joined.at, killed_at)
        rebalance = brain.last("rebalance", joined.at)
        moments["rebalance"] = max(rebalance.at, killed_at) if rebalance else None
    ready = brain.first("owns", assigned.at - 1e-3, wake_started + 1e-3, partition=partition)
    moments["writer_ready"] = ready.at if ready else None
    return moments, ready


def breakdown(timelines: list[Timeline]) -> dict[str, dict[str, float | None]]:
    """Per phase, over the timelines that have it: how many, the median and the max seconds."""
    out: dict[str, dict[str, float | None]] = {}
    for phase in (*PHASES, "total"):
        values = [v for t in timelines
                  for v in [t.total_s if phase == "total" else t.phases()[phase]] if v is not None]
        out[phase] = {"n": len(values), "median_s": _round(statistics.median(values)) if values else None,
                      "max_s": _round(max(values)) if values else None}
    return out


def worst(timelines: list[Timeline], n: int = 5) -> list[Timeline]:
    return sorted((t for t in timelines if t.total_s is not None), key=lambda t: -(t.total_s or 0.0))[:n]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
