"""Audit queries across a tenant's sessions and their pages, the access log of who ran them,
and the tenant's model cost (`/v1/audit/cost`). What the queries run is `read_model/audit.py`."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from wakeline.contract.events import Event, EventType
from wakeline.contract.ids import ACTOR_PATTERN
from wakeline_gateway.bounds import Moment, QueryId, query_text
from wakeline_gateway.shapes.base import Strict

ActorQuery = Annotated[str, Field(max_length=210, pattern=ACTOR_PATTERN)]
Principal = query_text(100)
ToolName = query_text(200)


class AuditEventsQuery(Strict):
    actor: list[ActorQuery] = Field(default_factory=list, max_length=20,
                                    description="Exact actors, e.g. user:alice, human:alice (repeatable).")
    principal: Principal | None = Field(default=None,
                                        description="Every actor of this principal: user:, human: and service:.")
    since: Moment | None = Field(default=None, description="Events at or after (ISO 8601, with offset).")
    until: Moment | None = Field(default=None, description="Events before.")
    type: list[EventType] = Field(default_factory=list, description="Only these types (repeatable).")
    tool: ToolName | None = Field(default=None, description="Tool calls and results of this tool.")
    session_id: QueryId | None = None
    outcome: Literal["error", "ok"] | None = Field(default=None, description="Tool results that failed, or not.")
    limit: int = Field(default=100, ge=1, le=1000)
    cursor: str | None = Field(default=None, max_length=500, description="next_cursor of the previous page.")

    @model_validator(mode="after")
    def _window(self) -> AuditEventsQuery:
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ValueError(f"{name} needs a UTC offset (e.g. 2026-11-23T00:00:00Z)")
        if self.since and self.until and self.until <= self.since:
            raise ValueError("until must be after since")
        return self


class AuditExportQuery(AuditEventsQuery):
    format: Literal["jsonl", "csv"] = Field(default="jsonl", description="JSON lines, or CSV with a header.")


class AuditEventsPublic(BaseModel):
    data: list[Event]
    count: int
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class AuditSessionPublic(BaseModel):
    session_id: str
    first_ts: datetime
    last_ts: datetime
    events: int
    types: list[str]
    actors: list[str]
    owner: str | None
    title: str | None
    deleted_at: datetime | None
    # A fork names its parent and the seq its own log continues after: its events here are
    # its own; those before fork_seq + 1 are the parent's (and show under the parent).
    parent_session_id: str | None = None
    fork_seq: int | None = None


class AuditSessionsPublic(BaseModel):
    data: list[AuditSessionPublic]
    count: int
    truncated: bool = Field(description="True when `limit` cut the list: narrow the window.")


class AccessLogEntryPublic(BaseModel):
    id: int
    principal: str
    role: str
    key_id: str
    at: datetime
    method: str
    path: str
    query: dict[str, Any]


class AccessLogPublic(BaseModel):
    data: list[AccessLogEntryPublic]
    count: int
    next_after: int | None


class TenantCostRowPublic(BaseModel):
    actor: str = Field(description="The owner of the sessions the model calls belong to.")
    model: str
    day: date
    calls: int
    tokens: dict[str, int]


class TenantCostPublic(BaseModel):
    since: datetime
    until: datetime
    data: list[TenantCostRowPublic]
    calls: int
    tokens: dict[str, int]
