"""A session's log read by position, its replay (with the brain's check), and its inclusion proof."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from wakeline.contract.events import Event, EventType
from wakeline.evidence.proofs import InclusionProof
from wakeline_gateway.bounds import PG_BIGINT_MAX
from wakeline_gateway.replay_judge import ReplayCheckPublic
from wakeline_gateway.shapes.base import Strict


class EventsQuery(Strict):
    after: int | None = Field(default=None, ge=0, le=PG_BIGINT_MAX, description="Only events with seq > after.")
    before: int | None = Field(default=None, ge=1, le=PG_BIGINT_MAX,
                               description="The `limit` events right before this seq.")
    limit: int = Field(default=100, ge=1, le=1000)
    type: list[EventType] = Field(default_factory=list, description="Only these types (repeatable).")

    @model_validator(mode="after")
    def _window_is_not_empty(self) -> EventsQuery:
        if self.after is not None and self.before is not None and self.after >= self.before:
            raise ValueError(f"after ({self.after}) must be less than before ({self.before})")
        return self


class EventsPublic(BaseModel):
    session_id: str
    data: list[Event]
    count: int


class ReplayStepPublic(BaseModel):
    seq: int
    type: str
    state: dict[str, Any]


class ReplayPublic(BaseModel):
    session_id: str
    data: list[ReplayStepPublic]
    count: int
    check: ReplayCheckPublic | None = Field(default=None, description="With check=true: whether today's brain "
                                                                       "would decide what the log recorded.")


class ProofPublic(BaseModel):
    """A session's inclusion proof, or why there is none yet (`proof` null, `reason` says)."""

    session_id: str
    proof: InclusionProof | None
    reason: str | None = None
