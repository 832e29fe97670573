"""Reading one session's log: events by position, transcript, export, replay, verify."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse

from wakeline.chain import first_broken_seq
from wakeline.events import EventBase
from wakeline.fold import FoldError
from wakeline_gateway import transcript
from wakeline_gateway.deps import Caller, SessionDep, StoreDep
from wakeline_gateway.errors import ApiError
from wakeline_gateway.replay import replay_steps
from wakeline_gateway.shapes import EventsPublic, EventsQuery, ReplayPublic, SessionPublic, VerifyPublic
from wakeline_gateway.store import CorruptEvent, EventQuery, SessionStore

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["reads"])
TranscriptFormat = Annotated[Literal["json", "markdown", "html"], Query(alias="format")]
HTML_HEADERS = {"Content-Security-Policy": transcript.CSP, "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer"}


async def _all(store: SessionStore, tenant: str, session_id: str) -> list[EventBase]:
    return [event async for event in store.all_events(tenant, session_id)]


@router.get("/events", response_model=EventsPublic)
async def read_events(session: SessionDep, caller: Caller, store: StoreDep,
                      query: Annotated[EventsQuery, Query()]) -> EventsPublic:
    """Events by position: `after=N` reads forward; `before=N&limit=k` is the lead-up to N."""
    window = EventQuery(after=query.after, before=query.before, limit=query.limit, types=tuple(query.type))
    events = await store.events(caller.tenant, session.session_id, window)
    return EventsPublic(session_id=session.session_id, data=events, count=len(events))


@router.get("/transcript", response_class=Response,
            responses={200: {"content": {"application/json": {}, "text/markdown": {}, "text/html": {}}}})
async def read_transcript(session: SessionDep, caller: Caller, store: StoreDep,
                          fmt: TranscriptFormat = "json") -> Response:
    items = transcript.entries(await _all(store, caller.tenant, session.session_id))
    meta = session.model_dump(mode="json")
    if fmt == "html":
        return HTMLResponse(transcript.render_html(meta, items), headers=HTML_HEADERS)
    if fmt == "markdown":
        return Response(transcript.render_markdown(meta, items), media_type="text/markdown; charset=utf-8")
    return JSONResponse(transcript.render_json(meta, items))


@router.get("/export", response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {}}, "description": "One event per line."}})
async def export_events(session: SessionDep, caller: Caller, store: StoreDep) -> StreamingResponse:
    async def lines() -> AsyncIterator[str]:
        async for event in store.all_events(caller.tenant, session.session_id):
            yield event.model_dump_json() + "\n"

    filename = re.sub(r"[^A-Za-z0-9._-]", "_", session.session_id)
    return StreamingResponse(lines(), media_type="application/x-ndjson",
                             headers={"Content-Disposition": f'attachment; filename="{filename}.jsonl"'})


@router.get("/replay", response_model=ReplayPublic)
async def replay_session(session: SessionDep, caller: Caller, store: StoreDep) -> ReplayPublic:
    """The state `wakeline.fold` derives after each event, in seq order."""
    try:
        steps = replay_steps(await _all(store, caller.tenant, session.session_id))
    except FoldError as err:
        raise ApiError(500, f"the log does not fold: {err}; GET .../verify reports the chain") from err
    return ReplayPublic(session_id=session.session_id, data=steps, count=len(steps))


@router.get("/verify", response_model=VerifyPublic)
async def verify_session(session: SessionDep, caller: Caller, store: StoreDep) -> VerifyPublic:
    """Recomputes the hash chain; `first_bad_seq` is where order, link or hash first fails."""
    return await verify_chain(store, caller.tenant, session)


async def verify_chain(store: SessionStore, tenant: str, session: SessionPublic) -> VerifyPublic:
    events: list[EventBase] = []
    unreadable = None
    try:
        async for event in store.all_events(tenant, session.session_id):
            events.append(event)
    except CorruptEvent as err:
        unreadable = err.seq
    broken = first_broken_seq(events)
    first_bad = broken if broken is not None else unreadable
    return VerifyPublic(session_id=session.session_id, ok=first_bad is None, first_bad_seq=first_bad,
                        events=len(events) + (unreadable is not None))
