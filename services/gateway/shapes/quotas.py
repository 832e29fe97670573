"""The tenant's quotas: set by an admin (`QuotasSet`) under the operator's ceilings, read with the
ceilings, the defaults, what applies, and the history of their changes (`QuotasPublic`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from wakeline.contract.quotas import MAXIMUM, QuotaName
from wakeline_gateway.shapes.base import Body

Count = Annotated[int | None, Field(ge=1, le=MAXIMUM["commands_per_second"])]


class QuotasSet(Body):
    """The tenant's quotas, all of them: one left out or null falls back to the gateway's default."""

    running_sessions: Count = Field(default=None, description="Sessions at work at once (from a turn's start "
                              "until the session waits for an input or ends); past it a session waits `queued` and "
                              "starts in arrival order.")
    sessions_per_minute: Count = Field(default=None, description="Sessions created (and forked) per minute.")
    commands_per_second: Count = Field(default=None, description="Commands per second, through the gateway or "
                                                                 "straight on the inbox, of every kind (creates, "
                                                                 "messages, approvals, ...) but a declared tool's "
                                                                 "result.")
    tool_calls_in_flight: Count = Field(default=None, description="Tool calls running at once, held by each "
                                                                  "runner: a call over it waits (never fails) "
                                                                  "and the session stays running.")
    tokens_per_day: Annotated[int | None, Field(ge=1, le=MAXIMUM["tokens_per_day"])] = Field(
        default=None, description="Model tokens (input, cached or not, and output) per UTC day across the "
                                  "tenant's sessions: once used, a session ends `quota` before its next model "
                                  "call, and a message continues it once the day rolls over or this is raised.")


class QuotaValues(BaseModel):
    running_sessions: int | None = None
    sessions_per_minute: int | None = None
    commands_per_second: int | None = None
    tool_calls_in_flight: int | None = None
    tokens_per_day: int | None = None


class QuotaChangePublic(BaseModel):
    old: QuotaValues | None = Field(description="The tenant's own quotas before (null: it had none set).")
    new: QuotaValues
    set_by: str
    set_at: datetime


class QuotasPublic(BaseModel):
    tenant: str
    effective: QuotaValues = Field(description="What applies: the lower of the tenant's own value and its "
                                               "ceiling (the operator's, else the default); null: unlimited.")
    own: QuotaValues = Field(description="What the tenant's admin set; null: the ceiling applies.")
    ceilings: QuotaValues = Field(description="The most the tenant's admin may set, fixed by the operator for this "
                                              "tenant (`wakeline quotas ceiling`); null: the default is the ceiling.")
    defaults: QuotaValues = Field(description="The gateway's defaults (WAKELINE_QUOTA_*).")
    enforced: list[QuotaName] = Field(description="The quotas enforced today: the rates at the gateway (429 with "
                                                  "Retry-After) and on the inbox (input_rejected quota_exceeded), "
                                                  "running sessions by the brains (queued), tool calls in flight "
                                                  "by the runners, tokens per day by the brains (session_ended "
                                                  "quota).")
    set_by: str | None
    set_at: datetime | None
    history: list[QuotaChangePublic] = Field(description="The newest changes (at most 100), oldest first; "
                                                         "the database keeps every one.")
