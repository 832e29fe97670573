"""Live tail of a session's events as server-sent events.

One frame per event (`id: <seq>`, `event: <type>`, `data: <event json>`), so a client that
reconnects with `Last-Event-ID` resumes right after the last event it saw. The tail
subscribes to the events feed (`feed.py`) first, then replays history from Postgres, then
sends what the feed brings; each event is sent once, in seq order, by the one cursor
(`seq <= cursor` is a duplicate, `seq > cursor + 1` a gap that Postgres fills). Postgres
is also read whenever the feed is quiet for `recheck_s` (every `poll_s` when the feed is
off), so a feed that misses an event delays a frame, never loses it. A comment line every
so often keeps idle connections (and proxies) open; a client too slow for its queue is cut
off and resumes with `Last-Event-ID`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from wakeline.contract.deltas import ModelDelta
from wakeline.contract.events import Event
from wakeline.storage.event_store import EventQuery, Scope
from wakeline_gateway.listeners import Listeners, Subscription
from wakeline_gateway.read_model.sessions import SessionStore

BATCH = 500
HEARTBEAT = ": heartbeat\n\n"
CAUGHT_UP = "caught up"  # `Tail.items`: what was stored when the tail started has been sent
# The events that decide whether a session is over: a user_message after session_ended
# continues it (as in wakeline.log.fold), anything else (markers, a woke) leaves it as it was.
TURNING_POINTS = ("session_ended", "deleted", "user_message")


def frame(event: Event) -> str:
    # model_dump_json never emits a raw newline, so the data fits on one `data:` line.
    return f"id: {event.seq}\nevent: {event.type}\ndata: {event.model_dump_json()}\n\n"


def delta_frame(delta: ModelDelta) -> str:
    """No `id:`: a delta is not a position in the log, so `Last-Event-ID` stays the last event's."""
    return f"event: delta\ndata: {delta.model_dump_json()}\n\n"


def ends_stream(turning_point: str | None, until_end: bool) -> bool:
    """Called once caught up, with the type of the latest of `TURNING_POINTS` so far.

    A deleted session is gone for good; an ended one may yet be continued, so the stream
    stops there only if asked to, and only while no message has continued it since.
    """
    return turning_point == "deleted" or (until_end and turning_point == "session_ended")


@dataclass
class Cursor:
    """Where the stream stands: the last seq sent, and live events held until their turn."""

    seq: int
    turning_point: str | None
    held: list[Event] = field(default_factory=list)
    deltas: list[ModelDelta] = field(default_factory=list)  # to send at once, in arrival order

    def take(self, event: Event) -> None:
        self.seq = event.seq
        if event.type in TURNING_POINTS:
            self.turning_point = event.type

    def ready(self) -> Event | None:
        """The held event that comes right after the cursor, dropping those already sent."""
        while self.held and self.held[0].seq <= self.seq:
            self.held.pop(0)
        return self.held.pop(0) if self.held and self.held[0].seq == self.seq + 1 else None


@dataclass(frozen=True)
class Tail:
    store: SessionStore
    scope: Scope
    session_id: str
    poll_s: float
    heartbeat_s: float
    listeners: Listeners = field(default_factory=Listeners)
    feed_running: Callable[[], bool] = lambda: False
    recheck_s: float = 1.0
    deltas: bool = False  # also send the model's text as it streams (`event: delta` frames)

    async def frames(self, after: int, until_end: bool) -> AsyncIterator[str]:
        yield ": wakeline stream\n\n"
        async for item in self.items(after, until_end):
            if isinstance(item, str):
                if item == HEARTBEAT:
                    yield item
            elif isinstance(item, ModelDelta):
                yield delta_frame(item)
            else:
                yield frame(item)

    async def items(self, after: int, until_end: bool) -> AsyncIterator[Event | ModelDelta | str]:
        """The session's events after `after` in seq order, deltas as they come, `HEARTBEAT`
        when it is quiet, and `CAUGHT_UP` once, when the history stored at the start is sent."""
        # Subscribed before the first read: whatever commits after it is either in
        # Postgres by then or on its way here.
        with self.listeners.subscription(self.scope.tenant, self.session_id, deltas=self.deltas) as live:
            cursor = Cursor(after, await self._turning_point_until(after))
            quiet_s, read_store, gap_reads, caught_up = 0.0, True, 0, False
            while True:
                while (event := cursor.ready()) is not None:
                    yield event
                    cursor.take(event)
                while cursor.deltas:
                    yield cursor.deltas.pop(0)
                if cursor.held:  # a gap: events the feed passed before this stream subscribed
                    if gap_reads and not await self._gap_pause(live, cursor):
                        return  # the archiver lags so far that the client is better off resuming
                    gap_reads, read_store = gap_reads + 1, True
                else:
                    gap_reads = 0
                if read_store:
                    seq_before = cursor.seq
                    async for stored in self._stored_after(cursor):
                        yield stored
                    quiet_s = 0.0 if cursor.seq > seq_before else quiet_s
                    read_store = False
                    if not caught_up:
                        caught_up = True
                        yield CAUGHT_UP
                    continue
                if ends_stream(cursor.turning_point, until_end) or live.cut_off:
                    return
                read_store, waited = await self._wait(live, cursor)
                quiet_s = quiet_s + waited if read_store else 0.0
                if quiet_s >= self.heartbeat_s:
                    yield HEARTBEAT
                    quiet_s = 0.0

    async def _stored_after(self, cursor: Cursor) -> AsyncIterator[Event]:
        while True:
            events = await self.store.events(self.scope, self.session_id, EventQuery(after=cursor.seq, limit=BATCH))
            for event in events:
                yield event
                cursor.take(event)
            if len(events) < BATCH:
                return

    async def _wait(self, live: Subscription, cursor: Cursor) -> tuple[bool, float]:
        """(whether to read Postgres next, how long was waited): the feed's next event, or
        a quiet interval after which Postgres is asked."""
        timeout = self.recheck_s if self.feed_running() else self.poll_s
        if live.deltas is not None:
            return await self._wait_with_deltas(live, live.deltas, cursor, timeout)
        try:  # asyncio.timeout: wait_for on 3.11 can swallow the cancel of a client gone away
            async with asyncio.timeout(timeout):
                event = await live.queue.get()
        except TimeoutError:
            return True, timeout
        cursor.held.append(event)
        self._hold(live, cursor)  # a cut-off stream still sends what it holds, then ends
        return False, 0.0

    async def _wait_with_deltas(self, live: Subscription, deltas: asyncio.Queue[ModelDelta], cursor: Cursor,
                                timeout: float) -> tuple[bool, float]:
        """`_wait`, woken by a delta too. A get cancelled before it ran leaves its item queued."""
        gets = (asyncio.ensure_future(live.queue.get()), asyncio.ensure_future(deltas.get()))
        done, _ = await asyncio.wait(gets, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for get in gets:
            get.cancel()
        await asyncio.gather(*gets, return_exceptions=True)
        event_get, delta_get = gets
        if delta_get.done() and not delta_get.cancelled():
            cursor.deltas.append(delta_get.result())
            while not deltas.empty():
                cursor.deltas.append(deltas.get_nowait())
        if event_get.done() and not event_get.cancelled():
            cursor.held.append(event_get.result())
            self._hold(live, cursor)
        return (True, timeout) if not done else (False, 0.0)

    async def _gap_pause(self, live: Subscription, cursor: Cursor) -> bool:
        """Gives the archiver `poll_s` to store the gap, holding what the feed brings meanwhile."""
        await asyncio.sleep(self.poll_s)
        return self._hold(live, cursor)

    def _hold(self, live: Subscription, cursor: Cursor) -> bool:
        """Moves what the feed has queued into `held`; False when it would outgrow the queue."""
        while not live.queue.empty():
            cursor.held.append(live.queue.get_nowait())
        if len(cursor.held) > live.queue.maxsize > 0:
            live.cut_off = True
        return not live.cut_off

    async def _turning_point_until(self, seq: int) -> str | None:
        """Where a resuming client stands, so a stream of a finished session still ends."""
        if seq < 1:
            return None
        query = EventQuery(before=seq + 1, limit=1, types=TURNING_POINTS)
        found = await self.store.events(self.scope, self.session_id, query)
        return found[0].type if found else None
