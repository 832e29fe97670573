"""A session's status and its `sessions` row: the one definition, shared by the fold, the
archiver's projection and the test seeders.

Deleted beats ended beats running (in a turn) beats idle; a session nothing has created
yet is `new`. `advance` moves a `SessionRow` over one event, deriving its status through
`session_status` as `wakeline.fold` does. Pure: no SQL here (that is the archiver's).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Literal

from wakeline.events import (
    Event, ModelResponded, ModelUnavailable, SessionCreated, SessionDeleted, SessionEnded, SessionForked,
    TitleGenerated, TurnEnded, TurnStarted, UserMessageReceived,
)

Status = Literal["new", "idle", "running", "waiting_model", "ended", "deleted"]


def session_status(*, deleted: bool, ended: bool, in_turn: bool, created: bool = True,
                   waiting_model: bool = False) -> Status:
    if deleted:
        return "deleted"
    if ended:
        return "ended"
    if in_turn:
        # Parked by an unavailable model (`model_unavailable`): the turn goes on once it answers.
        return "waiting_model" if waiting_model else "running"
    return "idle" if created else "new"


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


SESSION_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(SessionRow))


class NoSessionRow(ValueError):
    """An event other than `session_created` with no row to move forward."""


def advance(prev: SessionRow | None, event: Event) -> SessionRow:
    """The row after `event`. `prev` is the row before it (None only for `session_created`)."""
    match event:
        case SessionCreated():
            return _opened(event)
        case SessionForked():
            return _forked(event)
    if prev is None:
        raise NoSessionRow(f"{event.type} at seq {event.seq} of {event.session_id} before session_created")
    # The row keeps no in-turn flag: it reads back as `running`. That is exact for every
    # log the brain writes, which starts no turn in an ended or deleted session.
    in_turn, ended_reason, title = prev.status in ("running", "waiting_model"), prev.ended_reason, prev.title
    waiting = prev.status == "waiting_model"
    deleted_by, deleted_at = prev.deleted_by, prev.deleted_at
    match event:
        case TurnStarted():
            in_turn, waiting = True, False
        case TurnEnded():
            in_turn, waiting = False, False
        case ModelUnavailable():
            waiting = True
        case ModelResponded():
            waiting = False
        case SessionEnded(payload=p):
            in_turn, ended_reason, waiting = False, p.reason, False
        case UserMessageReceived():
            ended_reason = None  # a message to a finished session continues it
        case TitleGenerated(payload=p):
            title = p.title
        case SessionDeleted(payload=p):
            in_turn, waiting = False, False
            if deleted_by is None:  # the first deletion is the one recorded
                deleted_by, deleted_at = p.by, event.ts
    status = session_status(deleted=deleted_by is not None, ended=ended_reason is not None, in_turn=in_turn,
                            waiting_model=waiting)
    # Built field by field, not with dataclasses.replace: the archiver calls this once per
    # event, and replace's introspection was most of its cost (issue 10).
    return SessionRow(tenant=prev.tenant, session_id=prev.session_id, owner=prev.owner, title=title,
                      model=prev.model, status=status, last_seq=event.seq, last_hash=event.hash,
                      created_at=prev.created_at, updated_at=event.ts, ended_reason=ended_reason,
                      parent_session_id=prev.parent_session_id, fork_seq=prev.fork_seq, deleted_at=deleted_at,
                      deleted_by=deleted_by)


def _opened(event: SessionCreated) -> SessionRow:
    p = event.payload
    return SessionRow(tenant=event.tenant, session_id=event.session_id, owner=p.owner, title=p.title,
                      model=p.config.model, status="idle", last_seq=event.seq, last_hash=event.hash,
                      created_at=event.ts, updated_at=event.ts, parent_session_id=p.parent_session_id,
                      fork_seq=p.fork_seq)


def _forked(event: SessionForked) -> SessionRow:
    p = event.payload
    return SessionRow(tenant=event.tenant, session_id=event.session_id, owner=p.owner, title=p.title,
                      model=p.config.model, status="idle", last_seq=event.seq, last_hash=event.hash,
                      created_at=event.ts, updated_at=event.ts, parent_session_id=p.parent_session_id,
                      fork_seq=p.fork_seq)
