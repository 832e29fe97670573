"""A session's status and its `sessions` row: the one definition, shared by the fold, the
archiver's projection and the test seeders.

Deleted beats ended beats running (in a turn) beats idle; a session nothing has created
yet is `new`. What each event does to the flags a status is made of is one table,
`STATUS_MOVES`, read by the fold (`wakeline.log.fold`) and by `advance`, the archiver's fast
path over a `SessionRow`; both derive the status through `session_status`. Pure: no SQL
here (that is the archiver's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Literal

from wakeline.contract.events import Event, SessionCreated, SessionForked

Status = Literal["new", "idle", "queued", "running", "waiting_model", "waiting_client", "ended", "deleted"]


def session_status(*, deleted: bool, ended: bool, in_turn: bool, created: bool = True,
                   waiting_model: bool = False, waiting_client: bool = False, queued: bool = False) -> Status:
    if deleted:
        return "deleted"
    if ended:
        return "ended"
    if in_turn:
        # Parked by an unavailable model (`model_unavailable`): the turn goes on once it answers.
        if waiting_model:
            return "waiting_model"
        # A declared tool's call waits for the session's own harness (its result comes over HTTP).
        return "waiting_client" if waiting_client else "running"
    if queued:
        # A turn to start waits for one of the tenant's running-session slots (`turn_queued`).
        return "queued"
    return "idle" if created else "new"


@dataclass(frozen=True)
class StatusMove:
    """What one event type does to the flags a status is made of; None leaves a flag as it was."""

    in_turn: bool | None = None
    waiting_model: bool | None = None
    queued: bool | None = None  # waiting for a running-session slot (`turn_queued`)
    ends: bool = False       # `session_ended`: the session ends, with the event's reason
    continues: bool = False  # `user_message`: a message to a finished session continues it
    deletes: bool = False    # `deleted`: the session is deleted


# Every event type that moves a status, and how. The declared tools' calls waiting for a
# harness move it too (`waiting_client`); which calls those are depends on the payload
# (`answered_by`), so the fold and `advance` each count them, the end dropping them all.
# A plain dict typed read-only: the fold looks it up once per event, and a MappingProxyType's
# `get` cost the fold a few per cent (`bench.fold_speed`).
STATUS_MOVES: Mapping[str, StatusMove] = {
    "turn_queued": StatusMove(queued=True),
    "turn_started": StatusMove(in_turn=True, waiting_model=False, queued=False),
    # (A wait for a slot is before a turn, never in one; the end clears it all the same, so
    # the row, which keeps no flag the status hides, and the fold agree on any log.)
    "turn_ended": StatusMove(in_turn=False, waiting_model=False, queued=False),
    # Parked by an unavailable model: the turn goes on once it answers.
    "model_unavailable": StatusMove(waiting_model=True),
    "model_turn": StatusMove(waiting_model=False),
    "session_ended": StatusMove(in_turn=False, waiting_model=False, queued=False, ends=True),
    "user_message": StatusMove(continues=True),
    "deleted": StatusMove(in_turn=False, waiting_model=False, queued=False, deletes=True),
}


@dataclass(frozen=True)
class SessionRow:
    """One row of the `sessions` projection (0001), column for column."""

    tenant: str
    session_id: str
    owner: str
    title: str | None
    model: str | None
    status: Status
    last_seq: int
    last_hash: str
    created_at: datetime
    updated_at: datetime
    ended_reason: str | None = None
    parent_session_id: str | None = None
    fork_seq: int | None = None
    deleted_at: datetime | None = None
    deleted_by: str | None = None
    # Declared tools' calls waiting for the harness (0025): a call with `answered_by` client
    # counts one up, its result one down, the session's end resets it (as the fold drops them).
    pending_client: int = 0


SESSION_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(SessionRow))


class NoSessionRow(ValueError):
    """An event other than `session_created` with no row to move forward."""


def advance(prev: SessionRow | None, event: Event) -> SessionRow:
    """The row after `event`. `prev` is the row before it (None only for `session_created`)."""
    if prev is None and event.type not in _OPENING:
        raise NoSessionRow(f"{event.type} at seq {event.seq} of {event.session_id} before session_created")
    moved = _moved(prev, (event,))
    assert moved is not None
    return moved


def project(prev: SessionRow | None, events: Iterable[Event]) -> SessionRow | None:
    """The row after one session's `events` (in seq order), as `advance` one at a time would
    leave it, for the archiver's projection of a batch: forward only (an event at or below the
    row's seq is passed over, so a redelivery regresses nothing), and an event with no row
    yet is passed over (only `session_created` or `forked` opens one). None if no row."""
    return _moved(prev, events, forward_only=True)


_OPENING = frozenset({"session_created", "forked"})
_IN_TURN = frozenset({"running", "waiting_model", "waiting_client"})


def _moved(prev: SessionRow | None, events: Iterable[Event], forward_only: bool = False) -> SessionRow | None:
    # One definition for both: the row's fields move in a plain dict and the row is built
    # once at the end. The archiver projects every event it stores; a frozen row per event,
    # and class patterns (isinstance through pydantic's ABCMeta) per event, were a tenth of
    # its event loop (issue 10). The row keeps no in-turn flag: it reads back from the
    # status as `running`. That is exact for every log the brain writes, which starts no
    # turn in an ended or deleted session.
    row = None if prev is None else dict(vars(prev))
    for event in events:
        kind = event.type
        if forward_only and row is not None and event.seq <= row["last_seq"]:
            continue  # a redelivery, its session_created included, never regresses the row
        if kind in _OPENING:
            row = dict(vars(_opened(event)))  # type: ignore[arg-type]
            continue
        if row is None:
            continue  # only advance's caller can get here with no row, and it checked
        status = row["status"]
        in_turn, waiting, queued = status in _IN_TURN, status == "waiting_model", status == "queued"
        move = STATUS_MOVES.get(kind)
        if move is not None:
            in_turn = in_turn if move.in_turn is None else move.in_turn
            waiting = waiting if move.waiting_model is None else move.waiting_model
            queued = queued if move.queued is None else move.queued
            if move.ends:
                row["ended_reason"], row["pending_client"] = event.payload.reason, 0  # type: ignore[union-attr]
            if move.continues:
                row["ended_reason"] = None
            if move.deletes and row["deleted_by"] is None:
                row["deleted_by"], row["deleted_at"] = event.payload.by, event.ts  # type: ignore[union-attr]
        if kind == "tool_call" and event.payload.answered_by == "client":  # type: ignore[union-attr]
            row["pending_client"] += 1
        elif kind == "tool_result" and event.payload.answered_by == "client":  # type: ignore[union-attr]
            row["pending_client"] = max(0, row["pending_client"] - 1)
        elif kind == "title_generated":
            row["title"] = event.payload.title  # type: ignore[union-attr]
        row["status"] = session_status(deleted=row["deleted_by"] is not None, ended=row["ended_reason"] is not None,
                                       in_turn=in_turn, waiting_model=waiting,
                                       waiting_client=row["pending_client"] > 0, queued=queued)
        row["last_seq"], row["last_hash"], row["updated_at"] = event.seq, event.hash, event.ts
    return None if row is None else SessionRow(**row)


def _opened(event: SessionCreated | SessionForked) -> SessionRow:
    p = event.payload
    return SessionRow(tenant=event.tenant, session_id=event.session_id, owner=p.owner, title=p.title,
                      model=p.config.model, status="idle", last_seq=event.seq, last_hash=event.hash,
                      created_at=event.ts, updated_at=event.ts, parent_session_id=p.parent_session_id,
                      fork_seq=p.fork_seq)
