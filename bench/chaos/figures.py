"""The figures `make chaos` prints, from the committed log, the archive and the side effects.

Correctness: sessions completed (of started), seq gaps, duplicate seqs, unpaired tool
calls, tools run twice, tools reported done but never run, archive faults — all 0 except
the first, which must equal the sessions started. `tools_interrupted` is reported, not a
fault: a call whose runner died after recording its start is answered "crashed" and
never re-run (at most once). Recovery: from each brain kill to the next event of every
in-flight session, on the killed brain's partitions and on the survivors'. Pure: no I/O.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from typing import Iterable

from bench.chaos.ownership import Change, held_at
from wakeline.log.chain import first_broken_seq
from wakeline.contract.events import Event
from wakeline.contract.topics import partition_for

_STEP = re.compile(r"step-\d+")


def by_session(events: Iterable[Event]) -> dict[str, list[Event]]:
    out: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        out[event.session_id].append(event)
    return out


def correctness(started: list[str], logged: dict[str, list[Event]], stored: dict[str, list[Event]],
                runs: dict[str, list[str]]) -> dict[str, int]:
    completed = [s for s in started if _ended_reason(logged.get(s, [])) == "completed"]
    figures = Counter(sessions_started=len(started), sessions_completed=len(completed))
    for sid in started:
        seqs = [e.seq for e in logged.get(sid, [])]
        figures["seq_gaps"] += (max(seqs) - len(set(seqs))) if seqs else 0
        figures["duplicate_seqs"] += len(seqs) - len(set(seqs))
    for sid in completed:
        events = logged[sid]
        calls = {e.payload.tool_call_id: e.payload for e in events if e.type == "tool_call"}
        results = [e.payload for e in events if e.type == "tool_result"]
        answered = Counter(r.tool_call_id for r in results)
        figures["unpaired_tool_calls"] += (sum(1 for c in calls if answered[c] != 1) + len(set(answered) - set(calls))
                                           + len([e for e in events if e.type == "tool_call"]) - len(calls))
        lines = Counter(runs.get(sid, []))
        figures["tools_run_twice"] += sum(1 for n in lines.values() if n > 1)
        for result in results:
            ran = lines[_marker(calls.get(result.tool_call_id))]
            # at most once: a call whose start was recorded but whose end was not is answered
            # "crashed", never re-run; fine if said so, a fault if a success is reported unrun
            if result.is_error and result.error_kind == "crashed":
                figures["tools_interrupted"] += 1
            elif not ran:
                figures["tools_never_run"] += 1
        archived = stored.get(sid, [])
        if [e.event_id for e in archived] != [e.event_id for e in events] or first_broken_seq(archived) is not None:
            figures["archive_faults"] += 1
    for key in ("seq_gaps", "duplicate_seqs", "unpaired_tool_calls", "tools_run_twice", "tools_never_run",
                "tools_interrupted", "archive_faults"):
        figures.setdefault(key, 0)
    return dict(figures)


def recovery_after_brain_kills(kills: list[tuple[float, str]], changes: list[Change],
                               logged: dict[str, list[Event]], partitions: int) -> dict[str, dict]:
    """Seconds from a brain kill to the next event of each in-flight session: those on the
    killed brain's partitions (affected) and, apart, those on the survivors' (which an
    eager rebalance pauses too). A session's own pace (a 1 s tool) is part of both."""
    delays: dict[str, list[float]] = {"affected": [], "survivors": []}
    never = {"affected": 0, "survivors": 0}
    for killed_at, holder in kills:
        owned = held_at(changes, holder, killed_at - 1e-3)
        for sid, events in logged.items():
            if not in_flight(events, killed_at):
                continue
            kind = "affected" if partition_for(sid, partitions) in owned else "survivors"
            after = [e.ts.timestamp() for e in events if e.ts.timestamp() > killed_at]
            if after:
                delays[kind].append(min(after) - killed_at)
            else:
                never[kind] += 1
    return {kind: {"sessions": len(d) + never[kind], "never_resumed": never[kind],
                   "median_s": round(statistics.median(d), 2) if d else None,
                   "p90_s": round(statistics.quantiles(d, n=10)[-1], 2) if len(d) >= 2 else None,
                   "p99_s": round(statistics.quantiles(d, n=100)[-1], 2) if len(d) >= 2 else None,
                   "max_s": round(max(d), 2) if d else None}
            for kind, d in delays.items()}


def _marker(call) -> str | None:
    """The `step-N` line a chaos tool call appends to runs.txt."""
    match = _STEP.search(call.input.get("command", "")) if call is not None else None
    return match.group(0) if match else None


def in_flight(events: list[Event], at: float) -> bool:
    before = [e for e in events if e.ts.timestamp() <= at]
    return bool(before) and not any(e.type == "session_ended" for e in before)


def _ended_reason(events: list[Event]) -> str | None:
    ended = [e for e in events if e.type == "session_ended"]
    return ended[-1].payload.reason if ended else None
