"""Who in this gateway is waiting for which events: command waiters and live stream subscribers.

The events feed (`feed.py`) hands every decoded event to `Listeners.deliver`; this module
decides who sees it. Both kinds of listener are keyed by the event's own `tenant` and
`session_id`, so one tenant's waiter or stream never sees another tenant's events (the feed
reads every tenant's events and RLS is not there to help). A listener that goes away is
removed by its context manager; a subscriber whose bounded queue fills is cut off rather
than allowed to slow the feed (its client reconnects with `Last-Event-ID`).

The feed reads every session's events, most of which nobody here waits for: `watches`
lets it skip a record by its key (the session id) before decoding it, so a gateway's CPU
follows its own requests and streams rather than the whole deployment's event rate.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from wakeline.contract.deltas import ModelDelta
from wakeline.contract.events import Event

WaiterKey = tuple[str, str, str]  # tenant, session_id, causation_id
SessionKey = tuple[str, str]  # tenant, session_id
K = TypeVar("K")
V = TypeVar("V")


@dataclass(eq=False)
class Subscription:
    """One live stream's view of the feed: its session's events in log order, bounded."""

    tenant: str
    session_id: str
    queue: asyncio.Queue[Event] = field(default_factory=asyncio.Queue)
    cut_off: bool = False
    # The model's text as it streams (`ModelDelta`), for a stream that asked for it; None
    # when it did not. Best effort: a full queue drops deltas, never cuts the stream off.
    deltas: asyncio.Queue[ModelDelta] | None = None

    def offer_delta(self, delta: ModelDelta) -> None:
        if self.deltas is None or delta.tenant != self.tenant or delta.session_id != self.session_id:
            return
        try:
            self.deltas.put_nowait(delta)
        except asyncio.QueueFull:
            pass  # the finished reply comes as its model_turn event all the same

    def offer(self, event: Event) -> bool:
        """False once the queue is full: the subscriber is too slow and is cut off."""
        if event.tenant != self.tenant or event.session_id != self.session_id:
            return True  # never reached through the keyed table; a second line all the same
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.cut_off = True
            return False
        return True


class Listeners:
    def __init__(self, queue_size: int = 1000):
        self._queue_size = queue_size
        self._waiters: dict[WaiterKey, list[asyncio.Future[Event]]] = {}
        self._subscribers: dict[SessionKey, list[Subscription]] = {}
        # session id -> listeners of any tenant: a pre-filter only; delivery still matches the
        # event's own tenant and session (a record keyed for one session, naming another, is
        # skipped or delivered by what it names, never to the wrong listener)
        self._watched: Counter[str] = Counter()
        self._watched_deltas: Counter[str] = Counter()

    def watches(self, session_id: str) -> bool:
        """Whether anyone here listens to `session_id`'s events (any tenant)."""
        return session_id in self._watched

    def watches_deltas(self, session_id: str) -> bool:
        return session_id in self._watched_deltas

    @contextmanager
    def outcome(self, tenant: str, session_id: str, causation_id: str) -> Iterator[asyncio.Future[Event]]:
        """A future for the first event this gateway's feed sees caused by `causation_id`."""
        key = (tenant, session_id, causation_id)
        heard: asyncio.Future[Event] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append(heard)
        self._watched[session_id] += 1
        try:
            yield heard
        finally:
            _discard(self._waiters, key, heard)
            _uncount(self._watched, session_id)
            heard.cancel()

    @contextmanager
    def subscription(self, tenant: str, session_id: str, deltas: bool = False) -> Iterator[Subscription]:
        key = (tenant, session_id)
        subscriber = Subscription(tenant, session_id, asyncio.Queue(self._queue_size),
                                  deltas=asyncio.Queue(self._queue_size) if deltas else None)
        self._subscribers.setdefault(key, []).append(subscriber)
        self._watched[session_id] += 1
        if deltas:
            self._watched_deltas[session_id] += 1
        try:
            yield subscriber
        finally:
            _discard(self._subscribers, key, subscriber)
            _uncount(self._watched, session_id)
            if deltas:
                _uncount(self._watched_deltas, session_id)

    def deliver(self, event: Event) -> None:
        if event.causation_id is not None:
            for heard in self._waiters.get((event.tenant, event.session_id, event.causation_id), ()):
                if not heard.done():
                    heard.set_result(event)
        for subscriber in list(self._subscribers.get((event.tenant, event.session_id), ())):
            if not subscriber.offer(event):
                _discard(self._subscribers, (event.tenant, event.session_id), subscriber)

    def deliver_delta(self, delta: ModelDelta) -> None:
        for subscriber in self._subscribers.get((delta.tenant, delta.session_id), ()):
            subscriber.offer_delta(delta)

    def counts(self) -> tuple[int, int]:
        """(waiters, subscribers) registered now: what bounded memory is checked against."""
        return (sum(map(len, self._waiters.values())), sum(map(len, self._subscribers.values())))


def _discard(table: dict[K, list[V]], key: K, item: V) -> None:
    entries = table.get(key)
    if entries is None:
        return
    if item in entries:
        entries.remove(item)
    if not entries:
        del table[key]


def _uncount(counts: Counter[str], key: str) -> None:
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]
