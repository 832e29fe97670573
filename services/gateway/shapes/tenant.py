"""The tenant's retention window: set by an admin, read with the history of its changes."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from wakeline_gateway.shapes.base import Body


class RetentionSet(Body):
    keep_days: int = Field(ge=1, le=36_500, description="Months older than this may be dropped by retention.")


class RetentionChangePublic(BaseModel):
    keep_days: float
    set_by: str | None
    set_at: datetime


class RetentionPublic(BaseModel):
    keep_days: float | None = Field(description="null: no window of its own; the operator's default applies "
                                                "(and with none, events are kept forever).")
    set_by: str | None
    set_at: datetime | None
    history: list[RetentionChangePublic]
    note: str = ("Retention drops whole months, and only once every tenant with events in that month is "
                 "past its window; run by the operator as the maintenance role (`wakeline retention apply`).")
