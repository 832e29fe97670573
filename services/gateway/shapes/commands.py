"""What a caller sends to move a session on (a message, a tool result, a denial), and what
became of a command (`CommandPublic`). Creating and forking a session are in `sessions`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from wakeline.contract.budget import Budget
from wakeline_gateway.bounds import PG_BIGINT_MAX
from wakeline_gateway.shapes.base import Body
from wakeline_gateway.shapes.sessions import SessionPublic

# Free text has no length bound of its own: what bounds it is the event it becomes, measured
# in encoded bytes against max_record_bytes (413, admission.py).
Text = Field(min_length=1)


class MessageCreate(Body):
    text: str = Text
    expected_seq: int | None = Field(
        default=None, ge=0, le=PG_BIGINT_MAX, description="Refused with 409 unless the session is still at this seq.")
    budget: Budget | None = Field(
        default=None, description="Caps to set before the message is taken: each one named replaces the one in "
                                  "force (recorded as `budget_changed`). A session whose budget is spent takes a "
                                  "message only with a budget it has not spent: else 409 `budget_exhausted`.")


class ToolResultCreate(Body):
    output: str
    is_error: bool = False


class DenialCreate(Body):
    reason: str | None = None


class CommandPublic(BaseModel):
    """What became of a command: `done` once the brain recorded its outcome event."""

    session_id: str
    command_id: str
    status: Literal["done", "pending"]
    outcome: str | None = Field(default=None, description="The type of the event the command caused.")
    seq: int | None = None
    queued: bool | None = None
    note: str | None = None
    session: SessionPublic | None = None
