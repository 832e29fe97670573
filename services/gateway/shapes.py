"""HTTP shapes: `XCreate` is what a caller sends, `XPublic` what it gets, `XsPublic` a page.

Event bodies are the canonical `wakeline.events` models, so the OpenAPI schema at /docs
documents each event type exactly as it is stored.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from wakeline.events import EVENT_CLASSES, EndReason, Event, SessionConfig

EventType = Literal[tuple(EVENT_CLASSES)]  # type: ignore[valid-type]
Text = Field(min_length=1, max_length=1_000_000)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionCreate(Strict):
    config: SessionConfig | None = Field(
        default=None, description="Bound once for the session's lifetime; model defaults to the gateway's.")
    message: str | None = Field(default=None, min_length=1, max_length=1_000_000, description="The task.")
    title: str | None = Field(default=None, max_length=500)
    wait: bool = Field(default=True, description="Wait (bounded) until the session exists.")


class MessageCreate(Strict):
    text: str = Text
    expected_seq: int | None = Field(
        default=None, ge=0, description="Refused with 409 unless the session is still at this seq.")


class DenialCreate(Strict):
    reason: str | None = Field(default=None, max_length=10_000)


class SessionPublic(BaseModel):
    session_id: str
    owner: str
    title: str | None
    model: str | None
    status: str
    last_seq: int
    created_at: datetime
    updated_at: datetime
    ended_reason: EndReason | str | None = None
    parent_session_id: str | None = None
    fork_seq: int | None = None


class SessionsPublic(BaseModel):
    data: list[SessionPublic]
    count: int
    next_cursor: str | None = Field(description="Pass as `cursor` for the next (older) page.")


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


class EventsQuery(Strict):
    after: int | None = Field(default=None, ge=0, description="Only events with seq > after.")
    before: int | None = Field(default=None, ge=1, description="The `limit` events right before this seq.")
    limit: int = Field(default=100, ge=1, le=1000)
    type: list[EventType] = Field(default_factory=list, description="Only these types (repeatable).")

    @model_validator(mode="after")
    def _window_is_not_empty(self) -> EventsQuery:
        if self.after is not None and self.before is not None and self.after >= self.before:
            raise ValueError(f"after ({self.after}) must be less than before ({self.before})")
        return self


class EventsPublic(BaseModel):
    session_id: str
    data: list[Event]  # type: ignore[valid-type]
    count: int


class ReplayStepPublic(BaseModel):
    seq: int
    type: str
    state: dict[str, Any]


class ReplayPublic(BaseModel):
    session_id: str
    data: list[ReplayStepPublic]
    count: int


class VerifyPublic(BaseModel):
    session_id: str
    ok: bool
    first_bad_seq: int | None
    events: int
