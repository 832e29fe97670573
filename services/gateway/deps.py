"""Every dependency a route may ask for, each named once.

`Caller` is the one place that says who is calling: today the configured default tenant
and principal, later an API key. The tenant always comes from here, never from a request.
"""

from __future__ import annotations

from typing import Annotated, NamedTuple

from fastapi import Depends, Header, Path, Request

from wakeline_gateway.dispatch import CommandDispatcher
from wakeline_gateway.errors import ApiError
from wakeline_gateway.inbox import Inbox, command_id_for
from wakeline_gateway.settings import GatewaySettings
from wakeline_gateway.shapes import SessionPublic
from wakeline_gateway.store import SessionStore


class CallerIdentity(NamedTuple):
    tenant: str
    principal: str

    @property
    def actor(self) -> str:
        return f"user:{self.principal}"


def get_settings(request: Request) -> GatewaySettings:
    return request.app.state.settings


SettingsDep = Annotated[GatewaySettings, Depends(get_settings)]


def identify_caller(settings: SettingsDep) -> CallerIdentity:
    return CallerIdentity(settings.default_tenant, settings.default_principal)


Caller = Annotated[CallerIdentity, Depends(identify_caller)]


def get_store(request: Request) -> SessionStore:
    return request.app.state.store


def get_inbox(request: Request) -> Inbox:
    return request.app.state.inbox


StoreDep = Annotated[SessionStore, Depends(get_store)]
InboxDep = Annotated[Inbox, Depends(get_inbox)]


def get_dispatcher(inbox: InboxDep, store: StoreDep, settings: SettingsDep) -> CommandDispatcher:
    return CommandDispatcher(inbox, store, settings.wait_timeout_s, settings.outcome_poll_s)


DispatcherDep = Annotated[CommandDispatcher, Depends(get_dispatcher)]
SessionId = Annotated[str, Path(min_length=1, max_length=200, description="The session's id.")]


async def find_session(session_id: SessionId, caller: Caller, store: StoreDep) -> SessionPublic:
    """The live session, or 404: a deleted session is gone from every read."""
    row = await store.session(caller.tenant, session_id)
    if row is None or row["deleted_at"] is not None or row["status"] == "deleted":
        raise ApiError(404, f"session {session_id!r} not found (unknown, deleted, or not yet archived)",
                       session_id=session_id)
    return SessionPublic.model_validate(dict(row))


SessionDep = Annotated[SessionPublic, Depends(find_session)]


async def own_session(session: SessionDep, caller: Caller) -> SessionPublic:
    """Only the session's owner may continue or delete it."""
    if session.owner != caller.actor:
        raise ApiError(403, f"session {session.session_id!r} belongs to {session.owner}, not {caller.actor}")
    return session


OwnedSessionDep = Annotated[SessionPublic, Depends(own_session)]


IdempotencyKey = Annotated[str | None, Header(max_length=200, description="Retries with the same key are one command.")]


def derive_command_id(session_id: SessionId, caller: Caller, idempotency_key: IdempotencyKey = None) -> str:
    return command_id_for(caller.tenant, session_id, idempotency_key)


CommandId = Annotated[str, Depends(derive_command_id)]
