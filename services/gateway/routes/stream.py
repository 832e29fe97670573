"""The live tail: `GET /v1/sessions/{id}/stream` as server-sent events."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse

from wakeline_gateway.deps import FeedDep, Reader, SessionDep, SettingsDep, StoreDep
from wakeline_gateway.bounds import PG_BIGINT_MAX, is_position
from wakeline_gateway.errors import ApiError
from wakeline_gateway.problem import responses
from wakeline_gateway.sse import Tail

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["reads"],
                   responses=responses(401, 403, 404, 422, 500, 503))


def resume_after(last_event_id: str | None, after: int | None) -> int:
    """`Last-Event-ID` (a reconnecting EventSource) wins over `after`; both mean seq > N."""
    if last_event_id is None:
        return after or 0
    seq = int(last_event_id) if last_event_id.strip().isdigit() else None
    if not is_position(seq):
        raise ApiError(422, f"Last-Event-ID must be the seq of an event, got {last_event_id[:50]!r}",
                       errors=[{"where": "header.last-event-id", "problem": "not a seq"}])
    return seq


@router.get("/stream", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "`id: <seq>`, `event: <type>`, `data: <event json>` frames; with "
                                            "`deltas=true` also `event: delta` frames (no id) of the model's "
                                            "text as it streams, never stored."}})
async def stream_events(session: SessionDep, caller: Reader, store: StoreDep, settings: SettingsDep, feed: FeedDep,
                        after: Annotated[int | None, Query(ge=0, le=PG_BIGINT_MAX)] = None,
                        until_end: bool = False, deltas: bool = False,
                        last_event_id: Annotated[str | None, Header(max_length=50)] = None) -> StreamingResponse:
    tail = Tail(store, caller.scope, session.session_id, settings.stream_poll_s, settings.stream_heartbeat_s,
                feed.listeners, feed.running, settings.stream_recheck_s, deltas=deltas)
    return StreamingResponse(tail.frames(resume_after(last_event_id, after), until_end),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
