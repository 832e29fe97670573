"""A session as created or forked, shown, and listed (with what it cost so far)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from wakeline.contract.events import EndReason, SessionConfig
from wakeline_gateway.bounds import PG_BIGINT_MAX, query_text
from wakeline_gateway.shapes.base import Body, Strict


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
ListedStatus = Literal["new", "idle", "queued", "running", "waiting_model", "waiting_client", "ended"]


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
