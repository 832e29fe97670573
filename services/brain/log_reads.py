"""A session actor's reads of the log: its session's events when it wakes (`read_session`),
and a fork's parent history when it opens one (`open_fork`).

Weather (`wake.is_transient`: a restarting database or broker, a tail not read to its end)
is waited out with a backoff. Anything else is a fact about the log: a session whose log
cannot be read or folded is `SessionUnwakeable` (its inputs are refused), and a fork that
cannot start is dead-lettered with its reason. A snapshot is a shortcut, never the only way
in: one that will not resume costs a read of the whole log, not the session.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, TypeVar

from wakeline.agent.forking import ForkRefused, fork_drafts
from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.log.chain import Draft
from wakeline.log.fold import FoldError, fold
from wakeline.log.snapshots import resume
from wakeline.log.state import SessionState
from wakeline.storage.lineage import PrefixUnavailable
from wakeline_brain.actor_deps import ActorView
from wakeline_brain.wake import is_transient

log = logging.getLogger(__name__)
T = TypeVar("T")


class SessionUnwakeable(RuntimeError):
    """The session's log cannot be read or folded (e.g. retention dropped its start)."""


async def read_session(actor: ActorView) -> tuple[SessionState, list[e.Event]]:
    """The session's state, and the events it was folded from (its newest snapshot on)."""
    events = await _load(actor)
    try:
        return _fold(events), events
    except SessionUnwakeable as err:
        if not (events and isinstance(events[0], e.SnapshotTaken)):
            raise
        log.warning("waking %s: %s; folding its whole log instead", actor.session_id, err)
        events = await _load(actor, whole=True)
        return _fold(events), events


async def _load(actor: ActorView, whole: bool = False) -> list[e.Event]:
    try:
        return await retried(f"waking {actor.session_id}",
                             lambda: actor.deps.load(actor.session_id, actor.tenant, actor.partition, whole))
    except Exception as err:  # not weather: a fact about the log
        raise SessionUnwakeable(f"its log cannot be read: {type(err).__name__}: {err}") from err


def _fold(events: list[e.Event]) -> SessionState:
    try:
        return resume(events)
    except (ValueError, KeyError, TypeError) as err:  # FoldError; a snapshot state that will not parse
        raise SessionUnwakeable(f"its log does not fold: {err}") from err


async def open_fork(actor: ActorView, cmd: c.CreateSession) -> tuple[SessionState, list[Draft]] | None:
    """The fork's prefix folded, and its first events to seal after it: the `forked` event
    takes seq N + 1 and links to the parent's hash at N. None for a fork that cannot start,
    which is dead-lettered with its reason; nothing is sealed."""
    assert cmd.fork_of is not None
    origin, load_prefix = cmd.fork_of, actor.deps.load_prefix
    try:
        if load_prefix is None:
            raise ForkRefused("this brain was started without a prefix reader")
        prefix = await retried(f"session {actor.session_id}",
                               lambda: load_prefix(origin.session_id, cmd.tenant, origin.seq))
        state = fold(prefix)
        return state, fork_drafts(state, prefix, cmd, actor.deps.prices)
    except (PrefixUnavailable, FoldError, ForkRefused) as err:
        log.warning("session %s: fork of %s at %d refused: %s", actor.session_id, origin.session_id,
                    origin.seq, err)
        await actor.deps.dead_letter(cmd, f"fork_refused: {err}")
        return None


async def retried(what: str, read: Callable[[], Awaitable[T]]) -> T:
    """What `read` returns, once the weather lets it; any other failure is raised."""
    delay = 0.2
    while True:
        try:
            return await read()
        except Exception as err:
            if not is_transient(err):
                raise
            log.warning("%s: %r; retrying in %.1f s", what, err, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
