"""Creating, listing, reading and deleting sessions."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import asdict
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response

from wakeline.contract.commands import CreateSession, DeleteSession
from wakeline.contract.events import Event, SessionConfig, SessionCreated, SessionForked
from wakeline.log.status import advance
from wakeline.contract.prices import PriceTable
from wakeline_gateway.deps import (
    Creator, DeletableSessionDep, Deleter, DispatcherDep, IdempotencyKey, PricesDep, Reader, SessionDep,
    SettingsDep, StoreDep,
)
from wakeline_gateway.bounds import is_plain_id, utc_convertible
from wakeline_gateway.errors import ApiError
from wakeline_gateway.dispatch import describe
from wakeline_gateway.harness import pending_client_calls
from wakeline_gateway.idempotency import new_command_id, session_id_for
from wakeline_gateway.problem import responses
from wakeline_gateway.shapes.commands import CommandPublic
from wakeline_gateway.shapes.sessions import (
    SessionCreate, SessionListedPublic, SessionPublic, SessionsPublic, SessionsQuery,
)
from wakeline_gateway.read_model.sessions import SessionMatch

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], responses=responses(401, 403, 422, 500, 503))
DELETE_NOTE = ("The session is marked deleted (by whom, when) and disappears from every API read "
               "(list, get, events, transcript, replay, stream). Its events are NOT erased: they stay "
               "in Postgres, where the events table refuses DELETE by trigger, and remain visible to "
               "audit queries until retention drops their month.")
PENDING = {202: {"model": CommandPublic, "description": "Sent; no outcome recorded within the wait."}}


def with_model(config: SessionConfig | None, default_model: str) -> SessionConfig:
    config = config or SessionConfig()
    if "model" in config.model_fields_set:
        return config
    return config.model_copy(update={"model": default_model})


def priced(config: SessionConfig, prices: PriceTable) -> SessionConfig:
    """The config, if a dollar cap it has can be kept: the brain would end such a session before
    its first model call (a budget fails closed), so it is refused here, naming the setting."""
    if config.budget is not None and config.budget.usd is not None and prices.price_for(config.model) is None:
        raise ApiError(422, f"config.budget.usd caps dollars, but no price is known for model {config.model!r}: "
                            "cap tokens instead, or give it a price (WAKELINE_MODEL_PRICES)", code="unpriced_model",
                       errors=[{"where": "body.config.budget.usd", "problem": "the model has no price"}])
    return config


@router.post("", status_code=201, response_model=CommandPublic,
             responses={**PENDING, **responses(404, 409, 413, 429)})
async def create_session(body: SessionCreate, caller: Creator, settings: SettingsDep, store: StoreDep,
                         dispatcher: DispatcherDep, prices: PricesDep, response: Response,
                         idempotency_key: IdempotencyKey = None) -> CommandPublic:
    """`config.budget` caps what the session's model calls may spend; a dollar cap needs a
    price for the model (422 `unpriced_model` when none is known)."""
    dispatcher.admit(body)
    session_id = session_id_for(caller.tenant, caller.actor, idempotency_key)
    config = priced(with_model(body.config, settings.default_model), prices)
    command = CreateSession(command_id=new_command_id(), session_id=session_id, tenant=caller.tenant,
                            actor=caller.actor, config=config, message=body.message, title=body.title)
    sent, outcome = await dispatcher.send(command, body.wait, idempotency_key, archived=True)
    answer = describe(sent, outcome, settings.wait_timeout_s)
    if outcome is None:
        response.status_code = 202
        return answer
    row = await store.session(caller.scope, session_id)
    answer.session = SessionPublic.model_validate(dict(row)) if row is not None else opened(outcome)
    return answer


@router.get("", response_model=SessionsPublic)
async def list_sessions(caller: Reader, store: StoreDep,
                        query: Annotated[SessionsQuery, Query()]) -> SessionsPublic:
    """Newest first, filtered by status and by parts of owner, model and title; each with
    what its own model calls (turns, summaries) cost so far."""
    match = SessionMatch(status=query.status, owner=query.owner, model=query.model, title=query.q)
    cursor = decode_cursor(query.cursor) if query.cursor else None
    rows = await store.sessions(caller.scope, query.limit, cursor, match)
    costs = await store.costs(caller.scope, [r["session_id"] for r in rows],
                              min(r["created_at"] for r in rows)) if rows else {}
    data = [SessionListedPublic.model_validate({**dict(row), "cost": dict(costs.get(row["session_id"], {}))})
            for row in rows]
    next_cursor = encode_cursor(data[-1].created_at, data[-1].session_id) if len(data) == query.limit else None
    return SessionsPublic(data=data, count=len(data), next_cursor=next_cursor)


@router.get("/{session_id}", response_model=SessionPublic, responses=responses(404))
async def get_session(session: SessionDep, caller: Reader, store: StoreDep) -> SessionPublic:
    if session.status == "waiting_client":  # the projection counts them; the log names them
        calls = await pending_client_calls(store, caller.scope, session.session_id)
        session = session.model_copy(update={"pending_client_calls": list(calls.pending)})
    return session


@router.delete("/{session_id}", response_model=CommandPublic,
               responses={**PENDING, **responses(404, 409, 413, 429, 501)})
async def delete_session(session: DeletableSessionDep, caller: Deleter, dispatcher: DispatcherDep,
                         response: Response, idempotency_key: IdempotencyKey = None,
                         reason: Annotated[str | None, Query(max_length=10_000)] = None,
                         wait: bool = True) -> CommandPublic:
    command = DeleteSession(command_id=new_command_id(), session_id=session.session_id, tenant=caller.tenant,
                            actor=caller.actor, reason=reason)
    answer = await dispatcher.dispatch(command, wait, idempotency_key, archived=True)
    response.status_code = 200 if answer.status == "done" else 202
    answer.note = DELETE_NOTE if answer.status == "done" else f"{answer.note}. {DELETE_NOTE}"
    return answer


def opened(outcome: Event) -> SessionPublic | None:
    """The session as its first event makes it, when the archiver has not stored it in time."""
    if not isinstance(outcome, (SessionCreated, SessionForked)):
        return None
    return SessionPublic.model_validate(asdict(advance(None, outcome)))


def encode_cursor(created_at: datetime, session_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), session_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        created_at, session_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not is_plain_id(session_id):  # only ever an id this API issued; never raw text to Postgres
            raise ValueError("not a session id")
        return utc_convertible(datetime.fromisoformat(created_at)), session_id
    except (ValueError, TypeError, binascii.Error) as err:
        raise ApiError(422, "cursor is not one this API issued; pass next_cursor from a previous page",
                       errors=[{"where": "query.cursor", "problem": "unrecognized cursor"}]) from err
