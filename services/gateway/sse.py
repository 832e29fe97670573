"""Live tail of a session's events as server-sent events.

One frame per event (`id: <seq>`, `event: <type>`, `data: <event json>`), so a client that
reconnects with `Last-Event-ID` resumes right after the last event it saw. The tail polls
Postgres; a comment line every so often keeps idle connections (and proxies) open.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from wakeline.events import Event
from wakeline_gateway.store import EventQuery, Scope, SessionStore

BATCH = 500
# The events that decide whether a session is over: a user_message after session_ended
# continues it (as in wakeline.fold), anything else (markers, a woke) leaves it as it was.
TURNING_POINTS = ("session_ended", "deleted", "user_message")


def frame(event: Event) -> str:
    # model_dump_json never emits a raw newline, so the data fits on one `data:` line.
    return f"id: {event.seq}\nevent: {event.type}\ndata: {event.model_dump_json()}\n\n"


def ends_stream(turning_point: str | None, until_end: bool) -> bool:
    """Called once caught up, with the type of the latest of `TURNING_POINTS` so far.

    A deleted session is gone for good; an ended one may yet be continued, so the stream
    stops there only if asked to, and only while no message has continued it since.
    """
    return turning_point == "deleted" or (until_end and turning_point == "session_ended")


@dataclass(frozen=True)
class Tail:
    store: SessionStore
    scope: Scope
    session_id: str
    poll_s: float
    heartbeat_s: float

    async def frames(self, after: int, until_end: bool) -> AsyncIterator[str]:
        yield ": wakeline stream\n\n"
        cursor, quiet_s, turning_point = after, 0.0, await self._turning_point_until(after)
        while True:
            events = await self.store.events(self.scope, self.session_id, EventQuery(after=cursor, limit=BATCH))
            for event in events:
                yield frame(event)
                cursor = event.seq
                if event.type in TURNING_POINTS:
                    turning_point = event.type
            if len(events) == BATCH:
                continue
            if ends_stream(turning_point, until_end):
                return
            quiet_s = 0.0 if events else quiet_s + self.poll_s
            if quiet_s >= self.heartbeat_s:
                yield ": heartbeat\n\n"
                quiet_s = 0.0
            await asyncio.sleep(self.poll_s)

    async def _turning_point_until(self, seq: int) -> str | None:
        """Where a resuming client stands, so a stream of a finished session still ends."""
        if seq < 1:
            return None
        query = EventQuery(before=seq + 1, limit=1, types=TURNING_POINTS)
        found = await self.store.events(self.scope, self.session_id, query)
        return found[0].type if found else None
