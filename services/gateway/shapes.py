"""HTTP shapes: `XCreate` is what a caller sends, `XPublic` what it gets, `XsPublic` a page.

Event bodies are the canonical `wakeline.events` models, so the OpenAPI schema at /docs
documents each event type exactly as it is stored.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from wakeline.contract.events import EndReason, Event, EventType, SessionConfig
from wakeline.contract.ids import ACTOR_PATTERN
from wakeline.evidence.proofs import InclusionProof
from wakeline_gateway.bounds import PG_BIGINT_MAX, Moment, QueryId, query_text
from wakeline_gateway.replay_judge import ReplayCheckPublic

ActorQuery = Annotated[str, Field(max_length=210, pattern=ACTOR_PATTERN)]
Principal = query_text(100)
ToolName = query_text(200)

# Free text has no length bound of its own: what bounds it is the event it becomes, measured
# in encoded bytes against max_record_bytes (413, admission.py).
Text = Field(min_length=1)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Body(BaseModel):
    """A JSON request body: no unknown fields, and no coercion (`"wait": 0` is not a bool)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class SessionCreate(Body):
    config: SessionConfig | None = Field(
        default=None, description="Bound once for the session's lifetime; model defaults to the gateway's.")
    message: str | None = Field(default=None, min_length=1, description="The task.")
    title: str | None = Field(default=None, max_length=500)
    wait: bool = Field(default=True, description="Wait (bounded) until the session exists.")


class ForkCreate(Body):
    at_seq: int = Field(ge=1, le=PG_BIGINT_MAX, description="The parent's seq the fork's history ends at.")
    message: str = Field(min_length=1, description="The fork's first message, after the inherited history.")
    title: str | None = Field(default=None, max_length=500)
    wait: bool = Field(default=True, description="Wait (bounded) until the fork exists.")


class MessageCreate(Body):
    text: str = Text
    expected_seq: int | None = Field(
        default=None, ge=0, le=PG_BIGINT_MAX, description="Refused with 409 unless the session is still at this seq.")


class ToolResultCreate(Body):
    output: str
    is_error: bool = False


class DenialCreate(Body):
    reason: str | None = None


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
    pending_client_calls: list[str] = Field(
        default_factory=list, description="Declared tools' calls waiting for the session's harness (status "
                                          "`waiting_client`), by tool_call_id, in the order called.")


class SessionCostBrief(BaseModel):
    """What a listed session cost so far, from its own model calls, turns and summaries (a
    fork's inherited prefix is its parent's): `GET /v1/sessions/{id}/cost` has the whole account."""

    model_calls: int = 0
    input_tokens: int = Field(default=0, description="Every input token, cache writes and reads included.")
    output_tokens: int = 0


class SessionListedPublic(SessionPublic):
    cost: SessionCostBrief = SessionCostBrief()


# What a list may be filtered by: every status but `deleted` (a deleted session is never listed).
ListedStatus = Literal["new", "idle", "running", "waiting_model", "waiting_client", "ended"]


class SessionsQuery(Strict):
    limit: int = Field(default=50, ge=1, le=200)
    cursor: str | None = Field(default=None, max_length=500)
    status: ListedStatus | None = None
    owner: query_text(200) | None = Field(default=None, description="Part of the owner, any case (`alice`).")  # type: ignore[valid-type]
    model: query_text(200) | None = Field(default=None, description="Part of the model name, any case.")  # type: ignore[valid-type]
    q: query_text(200) | None = Field(default=None, description="Part of the title, any case.")  # type: ignore[valid-type]


class SessionsPublic(BaseModel):
    data: list[SessionListedPublic]
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


class ProofPublic(BaseModel):
    """A session's inclusion proof, or why there is none yet (`proof` null, `reason` says)."""

    session_id: str
    proof: InclusionProof | None
    reason: str | None = None


class MePublic(BaseModel):
    """Who the presented key is, and which actions (auth.PERMISSIONS) its role may take."""

    principal: str
    role: str
    tenant: str
    actor: str
    key_id: str
    actions: list[str]
