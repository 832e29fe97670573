"""Storing a batch so that one session's failure stays with that session.

The whole batch is tried in one transaction first (the common case). If the data fails
it, each session is tried alone, and a session that fails is tried event by event: what
stores is kept, and the session fails from its first event that does not. A weather
error at any point propagates, and the caller retries the batch as it was; everything
stored meanwhile is a redelivery then, a no-op.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import asyncpg

from wakeline.contract.events import Event
from wakeline_archiver.records import RawRecord, SessionKey
from wakeline_archiver.triage import session_key
from wakeline.runtime.weather import is_weather

log = logging.getLogger(__name__)
Pair = tuple[RawRecord, Event]
Offsets = dict[tuple[str, int], int]
Store = Callable[[Sequence[Event], Offsets], Awaitable[int]]


@dataclass(frozen=True)
class SessionFailure:
    session: SessionKey
    pairs: list[Pair]  # from the first event that failed, in seq order
    reason: str


@dataclass(frozen=True)
class Outcome:
    stored: int
    failures: list[SessionFailure]
    together: bool  # stored in one transaction, with the offsets it was given


async def store_isolating(pairs: Sequence[Pair], store: Store, offsets: Offsets) -> Outcome:
    try:
        return Outcome(await store([e for _, e in pairs], offsets), [], together=True)
    except Exception as exc:
        if is_weather(exc):
            raise
        log.warning("a batch of %d events failed (%s); storing it session by session", len(pairs), describe(exc))
    stored, failures = 0, []
    for session, session_pairs in _by_session(pairs).items():
        count, failure = await _store_session(session, session_pairs, store)
        stored += count
        failures += [failure] if failure else []
    return Outcome(stored, failures, together=False)


async def _store_session(session: SessionKey, pairs: list[Pair], store: Store) -> tuple[int, SessionFailure | None]:
    try:
        return await store([e for _, e in pairs], {}), None
    except Exception as exc:
        if is_weather(exc):
            raise
    stored = 0
    for index, (_, event) in enumerate(pairs):
        try:
            stored += await store([event], {})
        except Exception as exc:
            if is_weather(exc):
                raise
            return stored, SessionFailure(session, pairs[index:], describe(exc))
    return stored, None  # together it failed, alone every event stored: nothing to park


def _by_session(pairs: Sequence[Pair]) -> dict[SessionKey, list[Pair]]:
    sessions: dict[SessionKey, list[Pair]] = {}
    for pair in sorted(pairs, key=lambda p: (session_key(p[1]), p[1].seq)):
        sessions.setdefault(session_key(pair[1]), []).append(pair)
    return sessions


def describe(exc: BaseException) -> str:
    """A one-line reason for a data failure; names the cross-tenant case the database reports obscurely."""
    if isinstance(exc, asyncpg.UniqueViolationError) and exc.constraint_name == "event_keys_pkey":
        return ("session id already holds this seq under another tenant (event_keys (session_id, seq) is unique "
                f"across tenants): {exc}")
    if isinstance(exc, asyncpg.PostgresError):
        return f"the database refused the event ({type(exc).__name__}, SQLSTATE {exc.sqlstate}): {exc}"
    return str(exc) if isinstance(exc, RuntimeError) and str(exc) else f"{type(exc).__name__}: {exc}"
