"""The payloads of a session's life around its turns: created or forked, woken, handed to a
person and back, titled, refused an input, its budget changed, ended, deleted, snapshotted."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field

from wakeline.contract.budget import Budget, Spent
from wakeline.contract.events.config import SessionConfig
from wakeline.contract.events.frozen import Frozen
from wakeline.contract.prices import ModelPrice

# `budget`: a cap of the budget in force was reached before a model call (issue 34).
# `quota`: the tenant's daily token quota was used up before a model call (agent/quota.py).
EndReason = Literal["completed", "max_turns", "error", "interrupted", "cancelled", "budget", "quota"]
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
    "budget_exhausted",      # a message to a session whose budget is spent, raising it too little or not at all
    "quota_exceeded",        # a Kafka client's command over its tenant's rate quota (the gateway answers 429 itself)
]
REJECTION_CODES: tuple[str, ...] = get_args(RejectionCode)


# The price the brain figures the session's model calls at, bound with a budget (issue 34) so
# that the same log gives the same decision whatever the price table says later. None (left
# out of the dump, so events sealed before it keep their hash): no budget, or no price known.
def _price() -> Any:
    return Field(default=None, exclude_if=lambda v: v is None)


class SessionCreatedPayload(Frozen):
    config: SessionConfig
    owner: str
    title: str | None = None
    parent_session_id: str | None = None
    fork_seq: int | None = None
    price: ModelPrice | None = _price()


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
    price: ModelPrice | None = _price()


class SessionEndedPayload(Frozen):
    reason: EndReason
    detail: str | None = None
    # Reason `budget`: the budget in force and what the session had spent against it. Absent
    # otherwise, and left out of the dump, so ends sealed before them keep their hash.
    budget: Budget | None = Field(default=None, exclude_if=lambda v: v is None)
    spent: Spent | None = Field(default=None, exclude_if=lambda v: v is None)


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


class BudgetChangedPayload(Frozen):
    """The owner set the budget in force from here (a message that carried one, sealed before
    that message). `budget` is whole: the caps the message named over those of `previous`.
    `price`: the price the session's calls are figured at from here, the table's when it
    changed (None: the table knows none, and the price bound before stays); calls made before
    keep the price they were charged at."""

    budget: Budget
    previous: Budget | None = Field(default=None, exclude_if=lambda v: v is None)
    price: ModelPrice | None = _price()


class InputRejectedPayload(Frozen):
    command_id: str
    reason: str
    expected_seq: int | None = None
    # Absent on events recorded before codes existed; left out of the dump when None so
    # those events keep the canonical JSON (and hash) they were sealed with.
    code: RejectionCode | None = Field(default=None, exclude_if=lambda v: v is None)
    # `budget_exhausted`: the budget change the refused message asked for, as it would have been
    # recorded (None: it asked for none), so the replay check can decide the refusal again.
    budget_change: BudgetChangedPayload | None = Field(default=None, exclude_if=lambda v: v is None)


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
