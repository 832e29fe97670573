"""A fork's inherited history: reading a parent's prefix, and where a fork may start.

A fork's own log starts at `fork_seq + 1` with a `forked` event; the events before it are
its parent's 1..fork_seq, read from the parent (which may itself be a fork: the read
recurses), never copied. `prefix_events` is that read, in the tenant set on `conn`
(`inherited` the same recursion over any reader, which the in-memory store uses);
`unfinished_calls` is the pure rule for where a fork may not start. The gateway, the
brain's wake and verify share both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import asyncpg

from wakeline.storage.event_rows import SELECT_LIST, event_from_row
from wakeline.contract.events import Event, ModelResponded, SessionForked, ToolCallRequested, ToolResultReceived

SELECT_PREFIX = f"SELECT {SELECT_LIST} FROM events WHERE session_id = $1 AND seq <= $2 ORDER BY seq"
MAX_DEPTH = 1000  # forks of forks; a cycle cannot be sealed (0016), this bounds a corrupt archive


class PrefixUnavailable(LookupError):
    """The parent's events a fork inherits are not all in the archive (retention dropped a
    month of them, or they were never archived)."""


async def prefix_events(conn: asyncpg.Connection, parent_id: str, upto: int) -> list[Event]:
    """The events 1..`upto` of `parent_id`'s history, its own inherited prefix included."""
    async def own_upto(session_id: str, limit: int) -> list[Event]:
        return [event_from_row(r) for r in await conn.fetch(SELECT_PREFIX, session_id, limit)]
    return await inherited(own_upto, parent_id, upto)


async def inherited(own_upto: Callable[[str, int], Awaitable[list[Event]]], parent_id: str, upto: int) -> list[Event]:
    """`prefix_events` over `own_upto(session_id, limit)`: a session's own stored events up to `limit`."""
    chunks: list[list[Event]] = []
    session_id, limit = parent_id, upto
    for _ in range(MAX_DEPTH):
        own = await own_upto(session_id, limit)
        chunks.append(own)
        first = own[0] if own else None
        if not isinstance(first, SessionForked):
            break
        session_id, limit = first.payload.parent_session_id, first.payload.fork_seq
    events = [e for chunk in reversed(chunks) for e in chunk]
    missing = first_missing(events, upto)
    if missing is not None:
        raise PrefixUnavailable(f"seq {missing} of {parent_id}'s history (up to {upto}) is not in the archive")
    return events


def first_missing(events: Sequence[Event], upto: int) -> int | None:
    """The first seq of 1..upto that `events` (in seq order) lack, or None if they are dense."""
    for expected, event in enumerate(events, 1):
        if event.seq != expected:
            return expected
    return None if len(events) >= upto else len(events) + 1


def unfinished_calls(prefix: Sequence[Event]) -> list[str]:
    """Tool calls the prefix asks for (a model turn names them, or a tool_call records one)
    with no result in it: a fork there would inherit a call nobody will answer."""
    asked: dict[str, None] = {}
    for event in prefix:
        match event:
            case ModelResponded(payload=p):
                asked.update(dict.fromkeys(p.tool_call_ids))
            case ToolCallRequested(payload=p):
                asked[p.tool_call_id] = None
            case ToolResultReceived(payload=p):
                asked.pop(p.tool_call_id, None)
            case SessionForked():
                asked.clear()  # a fork inherits no call in flight: it was refused one
    return list(asked)


def whole_step_before(prefix: Sequence[Event], calls: Sequence[str]) -> int:
    """The last seq before the model turn that asked for the first of `calls`: where a fork
    of the same history could start instead."""
    for event in prefix:
        if isinstance(event, ModelResponded) and set(event.payload.tool_call_ids) & set(calls):
            return event.seq - 1
        if isinstance(event, ToolCallRequested) and event.payload.tool_call_id in calls:
            return event.seq - 1
    return 0
