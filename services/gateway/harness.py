"""One session's harness: its stream of declared tools' calls, and what a posted result met.

The stream follows the session's events with the same tail as `GET .../stream` (history
from Postgres, then the Kafka feed, no gap and no repeat), folds them into
`wakeline.log.client_calls.ClientCalls`, and once caught up sends every call still unanswered,
then each new one as it commits, then `session_ended`. A reconnect starts over from the
log, so whatever is unanswered is issued again and nothing answered meanwhile is. What a
harness has seen is never kept here: the log alone says what is pending.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from wakeline.log.client_calls import MOVING_TYPES, ClientCalls, OfferedCall
from wakeline.contract.deltas import ModelDelta
from wakeline.contract.events import Event, SessionEnded, ToolCallRequested, ToolResultReceived
from wakeline.storage.event_store import EventQuery, Scope
from wakeline_gateway.read_model.sessions import SessionStore
from wakeline_gateway.sse import CAUGHT_UP, HEARTBEAT, Tail

PAGE = 1000


def call_frame(call: OfferedCall, **extra: object) -> str:
    return f"id: {call.seq}\nevent: tool_call\ndata: {json.dumps({**call.wire(), **extra})}\n\n"


def ended_frame(event: Event) -> str:
    reason = event.payload.reason if isinstance(event, SessionEnded) else "deleted"
    body = {"session_id": event.session_id, "seq": event.seq, "reason": reason}
    return f"id: {event.seq}\nevent: session_ended\ndata: {json.dumps(body)}\n\n"


async def session_frames(tail: Tail) -> AsyncIterator[str]:
    """The harness stream of one session (module docstring)."""
    yield ": wakeline tool calls\n\n"
    calls, caught_up = ClientCalls(), False
    async for item in tail.items(0, until_end=False):
        if item is HEARTBEAT:
            yield HEARTBEAT
            continue
        if item is CAUGHT_UP:
            caught_up = True
            for call in calls.offerable():
                yield call_frame(call)
        elif isinstance(item, (str, ModelDelta)):
            continue  # deltas are not asked for
        else:
            offered = calls.apply(item)
            if caught_up:
                for call in offered:
                    yield call_frame(call)
        if caught_up and calls.ended is not None:
            yield ended_frame(calls.ended)
            return


async def pending_client_calls(store: SessionStore, scope: Scope, session_id: str) -> ClientCalls:
    """The session's declared tools' calls as the archived log has them."""
    calls, after = ClientCalls(), 0
    while True:
        page = await store.events(scope, session_id, EventQuery(after=after, limit=PAGE, types=MOVING_TYPES))
        for event in page:
            calls.apply(event)
        if len(page) < PAGE:
            return calls
        after = page[-1].seq


async def recorded_answer(store: SessionStore, scope: Scope, session_id: str, tool_call_id: str,
                          upto: int, wait_s: float) -> tuple[ToolCallRequested | None, ToolResultReceived | None]:
    """The call `tool_call_id` and the result recorded for it, once the archive holds the
    session up to `upto` (a rejection's seq: the result, if any, came before it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while await store.last_seq(scope.tenant, session_id) < upto and loop.time() < deadline:
        await asyncio.sleep(0.02)
    call, result, after = None, None, 0
    while True:
        query = EventQuery(after=after, limit=PAGE, types=("tool_call", "tool_result"))
        page = await store.events(scope, session_id, query)
        for event in page:
            if isinstance(event, ToolCallRequested) and event.payload.tool_call_id == tool_call_id:
                call = event
            elif isinstance(event, ToolResultReceived) and event.payload.tool_call_id == tool_call_id:
                result = result or event
        if len(page) < PAGE:
            return call, result
        after = page[-1].seq
