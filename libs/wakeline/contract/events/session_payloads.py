"""The payloads of a session's life around its turns: created or forked, woken, handed to a
person and back, titled, refused an input, ended, deleted, snapshotted."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field

from wakeline.contract.events.config import SessionConfig
from wakeline.contract.events.frozen import Frozen

EndReason = Literal["completed", "max_turns", "error", "interrupted", "cancelled"]
# Why the brain refused an input: machine-readable, so the gateway maps it to an HTTP
# status and clients branch on it without reading the English `reason`.
RejectionCode = Literal[
    "conflict",              # expected_seq is stale
    "wrong_tenant",          # the session belongs to another tenant
    "deleted",               # the session is deleted
    "already_exists",        # create_session for a session that exists
    "already_ended",         # cancel of an ended session
    "not_awaiting_approval", # approve/deny of a call that does not wait for one
    "not_pending",           # a tool result from the hands (a person or a service) for a call that is not pending
    "unknown_session",       # a command for a session that was never created
    "malformed",             # the record did not decode as an input
    "too_large",             # the input's event would exceed max_record_bytes
    "internal_error",        # handling the input raised: the session's input is parked here
]
REJECTION_CODES: tuple[str, ...] = get_args(RejectionCode)


class SessionCreatedPayload(Frozen):
    config: SessionConfig
    owner: str
    title: str | None = None
    parent_session_id: str | None = None
    fork_seq: int | None = None


class ForkedPayload(Frozen):
    """Opens a fork: its history is the parent's events 1..`fork_seq`, read from the parent
    (never copied); this event sits at `fork_seq + 1` and links to `parent_hash`, the
    parent's hash at `fork_seq`, so the fork's chain continues the parent's."""

    parent_session_id: str
    fork_seq: int = Field(ge=1)
    parent_hash: str
    config: SessionConfig
    owner: str
    title: str | None = None


class SessionEndedPayload(Frozen):
    reason: EndReason
    detail: str | None = None


class WokePayload(Frozen):
    host: str
    reason: str
    from_seq: int


class _HandsFields(Frozen):
    by: str


class TakeoverPayload(_HandsFields):
    pass


class HandbackPayload(_HandsFields):
    pass


class TitlePayload(Frozen):
    title: str


class FileReferencePayload(Frozen):
    path: str
    tool_call_id: str | None = None


class InputRejectedPayload(Frozen):
    command_id: str
    reason: str
    expected_seq: int | None = None
    # Absent on events recorded before codes existed; left out of the dump when None so
    # those events keep the canonical JSON (and hash) they were sealed with.
    code: RejectionCode | None = Field(default=None, exclude_if=lambda v: v is None)


class DeletedPayload(Frozen):
    by: str
    reason: str | None = None


class SnapshotPayload(Frozen):
    """The fold of every event before this one, as `wakeline.log.state_json` renders it, and its
    hash: a wake may start from it instead of the first event. Verify checks it against the
    fold of its prefix (`wakeline.log.snapshots`)."""

    state: dict[str, Any]
    state_hash: str
    format: str  # `state_json.STATE_FORMAT` of the code that wrote it
