"""Every dependency a route may ask for, each named once.

Who is calling comes from `auth.py` (the API key); the tenant always comes from there,
never from a request. Each route names the action it performs (`Reader`, `Writer`, ...):
that one dependency authenticates and checks the role.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from wakeline.contract.ids import SAFE_ID
from wakeline.contract.prices import PriceTable
from wakeline_gateway.audit.store import AuditStore
from wakeline_gateway.auth import Caller, caller_for, check_role, presented_key
from wakeline_gateway.bounds import SessionIdPath
from wakeline_gateway.dispatch import CommandDispatcher, Waits
from wakeline_gateway.errors import ApiError
from wakeline_gateway.feed import FeedState
from wakeline_gateway.listeners import Listeners
from wakeline_gateway.pool import Leases
from wakeline_gateway.inbox import Inbox
from wakeline_gateway.quotas.store import QuotaStore
from wakeline_gateway.read_model.sessions import SessionStore
from wakeline_gateway.settings import GatewaySettings
from wakeline_gateway.shapes.sessions import SessionPublic


# The dependencies below are `async def` though they never wait: FastAPI runs a plain
# `def` dependency in its thread pool, a thread hop per dependency on every request.
async def get_settings(request: Request) -> GatewaySettings:
    return request.app.state.settings


SettingsDep = Annotated[GatewaySettings, Depends(get_settings)]


async def get_store(request: Request) -> SessionStore:
    return request.app.state.store


async def get_inbox(request: Request) -> Inbox:
    return request.app.state.inbox


async def get_audit(request: Request) -> AuditStore:
    return request.app.state.audit


async def get_leases(request: Request) -> Leases:
    return request.app.state.leases


async def get_quotas(request: Request) -> QuotaStore:
    return request.app.state.quotas


async def get_prices(request: Request) -> PriceTable:
    """The model prices: the code's defaults with the settings' (`model_prices`) over them."""
    return request.app.state.prices


StoreDep = Annotated[SessionStore, Depends(get_store)]
PricesDep = Annotated[PriceTable, Depends(get_prices)]
LeasesDep = Annotated[Leases, Depends(get_leases)]
AuditDep = Annotated[AuditStore, Depends(get_audit)]
InboxDep = Annotated[Inbox, Depends(get_inbox)]
QuotasDep = Annotated[QuotaStore, Depends(get_quotas)]


# Declared so /docs offers "Authorize"; authenticate reads the header itself. auto_error=False:
# a missing or odd header gets our 401 with a JSON body, not Starlette's 403.
BEARER = HTTPBearer(auto_error=False, scheme_name="ApiKey",
                    description="`Authorization: Bearer wkl_...`, from `wakeline keys create`.")


async def authenticate(store: StoreDep, request: Request,
                       _: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)]) -> Caller:
    """The caller behind the request's API key; the tenant comes only from here.

    On a session's route the session row comes in the same round trip (the key and the
    session are a command's two reads before it is sent, issue 10); `find_session` takes it
    from `request.state` instead of reading again. It was read under the scope the key
    gives, and is only used once `caller_for` has accepted the key."""
    presented = presented_key(request.headers.get("authorization"))
    session_id = request.path_params.get("session_id")
    if isinstance(session_id, str) and SAFE_ID.fullmatch(session_id):
        stored, row = await store.key_and_session(presented.key_id, session_id)
        request.state.session_read = (session_id, row)
    else:
        stored = await store.api_key(presented.key_id)
    return caller_for(presented, stored)


def permit(action: str):
    """A dependency: the authenticated caller, if its role may do `action` (auth.PERMISSIONS)."""
    async def check(caller: Annotated[Caller, Depends(authenticate)]) -> Caller:
        return check_role(caller, action)

    check.__name__ = f"permit_{action.replace('.', '_')}"
    return check


Authenticated = Annotated[Caller, Depends(authenticate)]
Creator = Annotated[Caller, Depends(permit("session.create"))]
Reader = Annotated[Caller, Depends(permit("session.read"))]
Writer = Annotated[Caller, Depends(permit("session.write"))]
Deleter = Annotated[Caller, Depends(permit("session.delete"))]
Auditor = Annotated[Caller, Depends(permit("audit.read"))]
AccessLogReader = Annotated[Caller, Depends(permit("audit.access_log"))]
RetentionReader = Annotated[Caller, Depends(permit("tenant.retention.read"))]
RetentionSetter = Annotated[Caller, Depends(permit("tenant.retention.set"))]
QuotaReader = Annotated[Caller, Depends(permit("tenant.quotas.read"))]
QuotaSetter = Annotated[Caller, Depends(permit("tenant.quotas.set"))]
PoolWorker = Annotated[Caller, Depends(permit("tool_calls.pool"))]


async def get_feed(request: Request) -> FeedState:
    return _feed(request)


def _feed(request: Request) -> FeedState:
    # An app run without its lifespan (stores overridden in unit tests) has no feed: waits poll.
    return getattr(request.app.state, "feed", None) or FeedState(Listeners())


FeedDep = Annotated[FeedState, Depends(get_feed)]


async def get_dispatcher(inbox: InboxDep, store: StoreDep, request: Request) -> CommandDispatcher:
    # Settings and feed straight from the app, not as dependencies of their own: every command
    # route solves this one, and each dependency FastAPI solves costs tens of microseconds.
    settings: GatewaySettings = request.app.state.settings
    feed = _feed(request)
    waits = Waits(settings.wait_timeout_s, settings.outcome_poll_s, settings.outcome_recheck_s)
    return CommandDispatcher(inbox, store, waits, settings.max_record_bytes, settings.submit_timeout_s,
                             feed.listeners, feed.running, getattr(request.app.state, "quota_gate", None))


DispatcherDep = Annotated[CommandDispatcher, Depends(get_dispatcher)]
SessionId = SessionIdPath


async def record_audit_read(request: Request, caller: Caller, audit: AuditStore, asked: dict) -> None:
    """Appends who read the audit trail, and what they asked, to the access log."""
    await audit.record_access(caller.tenant, caller.principal, caller.role, caller.key_id,
                              request.method, request.url.path, asked)


async def find_session(session_id: SessionId, caller: Reader, store: StoreDep, audit: AuditDep,
                       request: Request) -> SessionPublic:
    """The live session, or 404: a deleted session is gone from every read, and a `user`
    does not see another user's session at all (Postgres hides it), so it is 404 too.

    An auditor, admin or service opening someone else's session is reading the audit
    trail: that goes to the access log first, like an audit query (`Caller.logged_on`).
    Every session route comes through here, so writes to it and deletes are logged too."""
    read = getattr(request.state, "session_read", None)
    row = read[1] if read is not None and read[0] == session_id else await store.session(caller.scope, session_id)
    if row is not None and caller.logged_on(row["owner"]):
        await record_audit_read(request, caller, audit, {"session_id": session_id})
    # Postgres already hid another user's session from a `user` (viewer_owns); said again here.
    foreign = row is not None and caller.scope.viewer is not None and row["owner"] != caller.scope.viewer
    if row is None or foreign or row["deleted_at"] is not None or row["status"] == "deleted":
        raise ApiError(404, f"session {session_id!r} not found (unknown, deleted, or not yet archived)",
                       session_id=session_id)
    return SessionPublic.model_validate(dict(row))


SessionDep = Annotated[SessionPublic, Depends(find_session)]


async def writable_session(session: SessionDep, caller: Writer) -> SessionPublic:
    """Its owner continues a session, or a service acting for the tenant."""
    if not caller.may_write(session.owner):
        raise ApiError(403, f"session {session.session_id!r} belongs to {session.owner}; "
                            f"{caller.actor} ({caller.role}) may read it but not write to it")
    return session


WritableSessionDep = Annotated[SessionPublic, Depends(writable_session)]


async def deletable_session(session: SessionDep, caller: Deleter, settings: SettingsDep) -> SessionPublic:
    """Its owner or a tenant admin deletes a session, where the store supports deletion."""
    if not settings.deletion_enabled:
        raise ApiError(501, "this deployment is built without deletion (WAKELINE_DELETION_ENABLED=false); "
                            "sessions cannot be deleted here")
    if caller.role != "admin" and session.owner != caller.actor:
        raise ApiError(403, f"session {session.session_id!r} belongs to {session.owner}; only its owner "
                            "or an admin may delete it")
    return session


DeletableSessionDep = Annotated[SessionPublic, Depends(deletable_session)]


# The alias names the header whatever a route calls its parameter.
IdempotencyKey = Annotated[str | None, Header(
    alias="Idempotency-Key", min_length=1, max_length=200,
    description="Retries with the same key and the same request are one command (the first outcome is "
                "returned); the same key with a different request is 422 `idempotency_key_reused`.")]
