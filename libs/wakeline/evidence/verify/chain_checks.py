"""A session's stored chain checked row by row, and its snapshots against the fold.

`SESSION_ROWS` reads the session's events joined with the event_keys registry;
`row_problems` recomputes each row's hash over its raw columns (not a parsed event, so a
value pydantic would coerce back, 1.0 for 1 or "5" for 5, is still a changed byte) and
follows the links; `snapshot_problems` folds the log from seq 1 and compares each
snapshot with the fold of its prefix; `fork_point` reads where a fork's own rows start.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from wakeline.log.chain import event_hash
from wakeline.storage.event_rows import READ_COLUMNS, SELECT_LIST, event_from_row, is_error, tool_name
from wakeline.contract.events import GENESIS_HASH, CorruptEvent, Event
from wakeline.log.fold import FoldError
from wakeline.log.snapshots import SnapshotMismatch, checked_fold
from wakeline.evidence.verify.reports import Problem

_TS = TypeAdapter(datetime)
# One statement, so one snapshot: a row inserted meanwhile is in both sides or neither.
SESSION_ROWS = f"""
SELECT coalesce(e.seq, k.seq) AS at_seq, e.*, k.seq AS key_seq, k.event_id AS key_event_id,
       k.ts AS key_ts, encode(k.hash, 'hex') AS key_hash
FROM (SELECT {SELECT_LIST}, tool_name, is_error FROM events WHERE session_id = $1) e
FULL JOIN (SELECT * FROM event_keys WHERE session_id = $1) k ON e.seq = k.seq
ORDER BY at_seq, e.ts
"""


def row_problems(rows: Sequence[Any], retained: frozenset[int] = frozenset(),
                 start: tuple[str, int] = (GENESIS_HASH, 1)) -> list[Problem]:
    """What is wrong with a session's rows (joined with event_keys), in seq order.

    A seq in `retained` (dropped by retention) is absent from events by right. `start` is
    the hash the first row links to and its seq: a fork's are its parent's at the fork point.
    """
    problems: list[Problem] = []
    prev_hash, expected = start
    for row in rows:
        seq = row["at_seq"]
        if row["seq"] is None and seq in retained:
            # The tombstone's hash is what the first surviving row must link to.
            prev_hash, expected = row["key_hash"], seq + 1
            continue
        if row["seq"] is None:
            problems.append(Problem(seq=seq, reason=f"missing: seq {seq} is registered in event_keys "
                                                    "but absent from events"))
            # The registry still knows its hash, so the next row's link stays checkable.
            prev_hash, expected = row["key_hash"], seq + 1
            continue
        if seq < expected:
            problems.append(Problem(seq=seq, reason=f"duplicate: a second row for seq {seq}"))
            continue
        if seq > expected:
            missing = f"{expected}" if seq == expected + 1 else f"{expected}..{seq - 1}"
            problems.append(Problem(seq=expected, reason=f"gap: seq {missing} missing from events "
                                                         "and event_keys"))
        elif row["prev_hash"] != prev_hash:
            problems.append(Problem(seq=seq, reason=f"broken link: prev_hash does not match the hash "
                                                    f"of seq {seq - 1}"))
        problems.extend(Problem(seq=seq, reason=r) for r in _own_problems(row))
        prev_hash, expected = row["hash"], seq + 1
    return problems


def _own_problems(row: Any) -> Iterable[str]:
    """A row's hash against its own columns, its event_keys entry and its derived columns."""
    body = {c: row[c] for c in READ_COLUMNS}
    body["event_id"] = str(body["event_id"])
    body["ts"] = _TS.dump_python(body["ts"], mode="json")
    body["payload"] = json.loads(body["payload"])
    if event_hash(body) != row["hash"]:
        yield "hash mismatch: the stored columns do not hash to the stored hash"
    if row["key_seq"] is None:
        yield "not registered in event_keys"
    elif (row["key_hash"], row["key_event_id"], row["key_ts"]) != (row["hash"], row["event_id"], row["ts"]):
        yield "event_keys disagrees with events (hash, event_id or ts)"
    try:
        event = event_from_row({c: row[c] for c in READ_COLUMNS})
    except CorruptEvent as exc:
        cause = exc.__cause__
        errors = cause.error_count() if isinstance(cause, ValidationError) else 1
        yield f"not a valid event: {errors} validation error(s)"
        return
    if (row["tool_name"], row["is_error"]) != (tool_name(event), is_error(event)):
        yield "derived audit columns (tool_name, is_error) disagree with the payload"


def snapshot_problems(rows: Sequence[Any], retained: frozenset[int] = frozenset()) -> list[Problem]:
    """The first `snapshot` row that does not hold the fold of the rows before it.

    Checked only while the log folds from seq 1: a log cut by retention, a gap or a row
    that is not an event stops the check there (those are reported by `row_problems`).
    """
    if retained or not any(r["type"] == "snapshot" for r in rows if r["seq"] is not None):
        return []
    events: list[Event] = []
    for row in rows:
        if row["seq"] is None or row["seq"] != len(events) + 1:
            break
        try:
            events.append(event_from_row({c: row[c] for c in READ_COLUMNS}))
        except CorruptEvent:
            break
    try:
        checked_fold(events)
    except SnapshotMismatch as lie:
        return [Problem(seq=lie.seq, reason=f"snapshot disagrees with the fold of its prefix: {lie.reason}")]
    except FoldError:
        pass
    return []

def fork_point(rows: Sequence[Any]) -> tuple[str, int, str] | None:
    """(parent, fork_seq, parent_hash) when the first stored row is a `forked` event."""
    first = next((r for r in rows if r["seq"] is not None), None)
    if first is None or first["type"] != "forked":
        return None
    payload = json.loads(first["payload"]) if isinstance(first["payload"], str) else first["payload"]
    try:
        return str(payload["parent_session_id"]), int(payload["fork_seq"]), str(payload["parent_hash"])
    except (KeyError, TypeError, ValueError):
        return None  # not a valid event: row_problems reports it
