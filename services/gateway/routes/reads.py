"""Reading one session's log: events by position, transcript, export, replay, verify."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse

from wakeline.evidence import verify, witnesses
from wakeline.evidence.checkpoints import load_key, read_anchor
from wakeline.storage.event_store import EventQuery, Scope
from wakeline.contract.events import Event
from wakeline.log.fold import FoldError
from wakeline.storage.lineage import PrefixUnavailable
from wakeline_gateway.deps import Reader, SessionDep, SettingsDep, StoreDep
from wakeline_gateway.errors import ApiError
from wakeline_gateway.problem import responses
from wakeline_gateway.replay import replay_steps
from wakeline_gateway.replay_judge import judge
from wakeline_gateway.shapes.reads import EventsPublic, EventsQuery, ProofPublic, ReplayPublic
from wakeline_gateway.shapes.sessions import SessionPublic
from wakeline_gateway.read_model.sessions import SessionStore
from wakeline_gateway.transcript.entries import entries, render_json
from wakeline_gateway.transcript.html import CSP, render_html
from wakeline_gateway.transcript.markdown import render_markdown

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["reads"],
                   responses=responses(401, 403, 404, 422, 500, 503))
TranscriptFormat = Annotated[Literal["json", "markdown", "html"], Query(alias="format")]
HTML_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer"}


async def own_events(store: SessionStore, scope: Scope, session_id: str) -> list[Event]:
    """The session's own log (a fork's starts with its `forked` event)."""
    return [event async for event in store.all_events(scope, session_id)]


async def whole_history(store: SessionStore, scope: Scope, session: SessionPublic) -> list[Event]:
    """The session's history: a fork's inherited prefix (read from its parents), then its own
    log. A prefix retention dropped is 409 `prefix_unavailable`, saying so."""
    own = await own_events(store, scope, session.session_id)
    if session.parent_session_id is None or session.fork_seq is None:
        return own
    try:
        return await store.history(scope, session.parent_session_id, session.fork_seq) + own
    except PrefixUnavailable as err:
        raise ApiError(409, f"the history this fork inherits is gone: {err}", code="prefix_unavailable") from err


@router.get("/events", response_model=EventsPublic)
async def read_events(session: SessionDep, caller: Reader, store: StoreDep,
                      query: Annotated[EventsQuery, Query()]) -> EventsPublic:
    """Events by position: `after=N` reads forward; `before=N&limit=k` is the lead-up to N."""
    window = EventQuery(after=query.after, before=query.before, limit=query.limit, types=tuple(query.type))
    events = await store.events(caller.scope, session.session_id, window)
    return EventsPublic(session_id=session.session_id, data=events, count=len(events))


@router.get("/transcript", response_class=Response,
            responses={200: {"content": {"application/json": {}, "text/markdown": {}, "text/html": {}}}})
async def read_transcript(session: SessionDep, caller: Reader, store: StoreDep,
                          fmt: TranscriptFormat = "json") -> Response:
    history = await whole_history(store, caller.scope, session)
    items = entries(history, own_session=session.session_id if session.parent_session_id else None)
    meta = session.model_dump(mode="json")
    if fmt == "html":
        return HTMLResponse(render_html(meta, items), headers=HTML_HEADERS)
    if fmt == "markdown":
        return Response(render_markdown(meta, items), media_type="text/markdown; charset=utf-8")
    return JSONResponse(render_json(meta, items))


@router.get("/export", response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {}}, "description": "One event per line."}})
async def export_events(session: SessionDep, caller: Reader, store: StoreDep,
                        inherited: bool = False) -> StreamingResponse:
    """The session's own events, one JSON line each; `inherited=true` puts a fork's
    inherited prefix (its parents' events, each naming its own session_id) first."""
    prefix: list[Event] = []
    if inherited and session.parent_session_id is not None and session.fork_seq is not None:
        try:
            prefix = await store.history(caller.scope, session.parent_session_id, session.fork_seq)
        except PrefixUnavailable as err:
            raise ApiError(409, f"the history this fork inherits is gone: {err}", code="prefix_unavailable") from err

    async def lines() -> AsyncIterator[str]:
        for event in prefix:
            yield event.model_dump_json() + "\n"
        async for event in store.all_events(caller.scope, session.session_id):
            yield event.model_dump_json() + "\n"

    filename = re.sub(r"[^A-Za-z0-9._-]", "_", session.session_id)
    return StreamingResponse(lines(), media_type="application/x-ndjson",
                             headers={"Content-Disposition": f'attachment; filename="{filename}.jsonl"'})


@router.get("/replay", response_model=ReplayPublic)
async def replay_session(session: SessionDep, caller: Reader, store: StoreDep,
                         check: Annotated[bool, Query(description="Also run the recorded history through today's "
                                                                  "brain and report the first seq where it would "
                                                                  "decide otherwise (`check`).")] = False,
                         ) -> ReplayPublic:
    """The state `wakeline.log.fold` derives after each event, in seq order; with `check=true`,
    also whether today's code would still do what the recorded session did."""
    history = await whole_history(store, caller.scope, session)
    try:
        steps = replay_steps(history)
    except FoldError as err:
        raise ApiError(500, f"the log does not fold: {err}; GET .../verify reports the chain") from err
    verdict = await judge(history) if check else None
    return ReplayPublic(session_id=session.session_id, data=steps, count=len(steps), check=verdict)


@router.get("/verify", response_model=verify.Report)
async def verify_session(session: SessionDep, caller: Reader, store: StoreDep, settings: SettingsDep) -> verify.Report:
    """Recomputes the hash chain from the stored rows and compares it with the key registry,
    the HMAC checkpoints and, when the gateway has the signer's public key, the Ed25519-signed
    checkpoints **as Postgres holds them** (`witnesses_checked: ["postgres"]`; a retention cut
    then counts only when a genuine statement signed it). It does not read the topic or the
    file sink: the cross-check of the three witnesses is `python -m wakeline.evidence.verify`'s.
    `first_bad_seq` and `reason` name the first problem."""
    key = load_key(settings.checkpoint_key_file, create=False)
    anchored = read_anchor(settings.checkpoint_dir, caller.tenant)
    return await store.verify_session(caller.scope, session.session_id, key, anchored, signer_public_key(settings))


def signer_public_key(settings: SettingsDep) -> bytes | None:
    """The gateway's copy of the signer's public key (None: not configured, said in the
    report as `evidence_checked: false`); a key that is not the pinned one is a 503."""
    try:
        return witnesses.public_key(settings)
    except (OSError, ValueError) as err:
        raise ApiError(503, f"verify is misconfigured: {err}", code="verify_unavailable") from err


@router.get("/proof", response_model=ProofPublic)
async def inclusion_proof(session: SessionDep, caller: Reader, store: StoreDep) -> ProofPublic:
    """The session's chain head and its Merkle path to the newest Ed25519-signed tenant root
    naming it, with that signed statement: `wakeline proof-check` verifies it offline with
    the signer's public key alone. `proof` is null until a signed checkpoint names it."""
    proof = await store.proof(caller.scope, session.session_id)
    reason = None if proof else "no signed checkpoint names this session yet (the signer anchors it on its next round)"
    return ProofPublic(session_id=session.session_id, proof=proof, reason=reason)
