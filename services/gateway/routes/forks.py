"""Going back in a session: fork it at a seq, see its tree of forks, and what it cost."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from wakeline.contract.commands import CreateSession, ForkOrigin
from wakeline.storage.lineage import PrefixUnavailable, unfinished_calls, whole_step_before
from wakeline_gateway.deps import (
    Creator, DispatcherDep, IdempotencyKey, PricesDep, Reader, SessionDep, SettingsDep, StoreDep,
)
from wakeline_gateway.dispatch import describe
from wakeline_gateway.errors import ApiError
from wakeline_gateway.idempotency import new_command_id, session_id_for
from wakeline_gateway.problem import responses
from wakeline_gateway.routes.reads import own_events
from wakeline_gateway.routes.sessions import PENDING, opened
from wakeline_gateway.shapes.commands import CommandPublic
from wakeline_gateway.shapes.sessions import ForkCreate, SessionPublic
from wakeline_gateway.cost import CostPublic, session_cost
from wakeline_gateway.tree import TreeNodePublic, steps

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["forks"],
                   responses=responses(401, 403, 404, 422, 500, 503))
MAX_TREE_SESSIONS = 1000


@router.post("/fork", status_code=201, response_model=CommandPublic, responses={**PENDING, **responses(409, 413, 429)})
async def fork_session(body: ForkCreate, parent: SessionDep, caller: Creator, settings: SettingsDep,
                       store: StoreDep, dispatcher: DispatcherDep, response: Response,
                       idempotency_key: IdempotencyKey = None) -> CommandPublic:
    """A new session whose history is this one's events 1..at_seq (read from it, never
    copied), continued with `message`. Only the session's owner or an admin may fork it. A
    seq inside an unfinished tool call (asked for, no result yet) is refused with 409
    `fork_inside_tool_call`, naming the last whole step before it."""
    if caller.role != "admin" and parent.owner != caller.actor:
        raise ApiError(403, f"session {parent.session_id!r} belongs to {parent.owner}; only its owner or an "
                            "admin may fork it", session_id=parent.session_id)
    if body.at_seq > parent.last_seq:
        raise ApiError(422, f"session {parent.session_id!r} has no seq {body.at_seq}: it ends at {parent.last_seq}",
                       code="unknown_seq", last_seq=parent.last_seq)
    try:
        history = await store.history(caller.scope, parent.session_id, body.at_seq)
    except PrefixUnavailable as err:
        raise ApiError(409, f"cannot fork: {err}", code="prefix_unavailable") from err
    calls = unfinished_calls(history)
    if calls:
        whole = whole_step_before(history, calls)
        raise ApiError(409, f"seq {body.at_seq} is inside unfinished tool call(s) {', '.join(calls)}: fork at "
                            f"seq {whole} (before the model asked for them) or after their results",
                       code="fork_inside_tool_call", tool_call_ids=calls, whole_step_seq=whole)
    dispatcher.admit(body)
    origin = ForkOrigin(session_id=parent.session_id, seq=body.at_seq, hash=history[-1].hash)
    command = CreateSession(command_id=new_command_id(), session_id=session_id_for(caller.tenant, caller.actor,
                                                                                     idempotency_key),
                            tenant=caller.tenant, actor=caller.actor, message=body.message, title=body.title,
                            fork_of=origin)
    sent, outcome = await dispatcher.send(command, body.wait, idempotency_key, archived=True)
    answer = describe(sent, outcome, settings.wait_timeout_s)
    if outcome is None:
        response.status_code = 202
        return answer
    row = await store.session(caller.scope, command.session_id)
    answer.session = SessionPublic.model_validate(dict(row)) if row is not None else opened(outcome)
    return answer


@router.get("/tree", response_model=TreeNodePublic)
async def session_tree(session: SessionDep, caller: Reader, store: StoreDep,
                       depth: Annotated[int, Query(ge=0, le=100)] = 100) -> TreeNodePublic:
    """The session's steps, with the forks taken from it (and from them, to `depth`) as
    branches at the seq each starts after: ids, seqs, owners and status. A user sees the
    forks it owns; a deleted fork is shown as such, without its steps."""
    root = await _node(store, caller, dict(session.model_dump()))
    level, seen = [root], 1
    for _ in range(depth):
        rows = await store.forks(caller.scope, [n.session_id for n in level]) if level else []
        if not rows:
            break
        by_id = {n.session_id: n for n in level}
        level = []
        for row in rows[: MAX_TREE_SESSIONS - seen]:
            child = await _node(store, caller, dict(row))
            by_id[row["parent_session_id"]].forks.append(child)
            level.append(child)
        seen += len(level)
    return root


async def _node(store: StoreDep, caller: Reader, row: dict) -> TreeNodePublic:
    deleted = row.get("deleted_at") is not None or row["status"] == "deleted"
    own = [] if deleted else await own_events(store, caller.scope, row["session_id"])
    return TreeNodePublic(session_id=row["session_id"], owner=row["owner"], title=row["title"],
                          status="deleted" if deleted else row["status"], last_seq=row["last_seq"],
                          parent_session_id=row["parent_session_id"], fork_seq=row["fork_seq"], steps=steps(own))


@router.get("/cost", response_model=CostPublic)
async def session_cost_report(session: SessionDep, caller: Reader, store: StoreDep, prices: PricesDep) -> CostPublic:
    """Tokens per model (every count the model recorded, cache tokens included), turns, tool
    calls, compactions with tokens before and after, wall time in the model and in tools, the
    dollars, and the budget in force with what was spent against it. A fork's figures are its
    own log's; its inherited prefix is its parent's cost."""
    return session_cost(session.session_id, await own_events(store, caller.scope, session.session_id), prices)
