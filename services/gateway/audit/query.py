"""An audit query (`AuditQuery`), the SQL it runs, and the cursor that pages it. Pure.

Pages are keyset-paged in (ts, session_id, seq) order, which is total and stable: a
cursor names the last row seen, never an offset, so a page is as cheap deep in the log as
at its start and no row is skipped or repeated while the log grows (an event archived
later with an older ts than the cursor is, by construction, not in a later page: exports
of a window still being written should end at a past `until`). With tenant and one actor
fixed, the `events_tenant_actor_ts` index (0023) yields rows in ts order and an incremental
sort orders each run of equal ts, so a first page reads about `limit` index entries per
month instead of sorting every match.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from wakeline.storage.event_rows import SELECT_LIST
from wakeline.contract.events import Event
from wakeline_gateway.bounds import is_plain_id, is_position, utc_convertible


class BadCursor(ValueError):
    pass


@dataclass(frozen=True)
class AuditQuery:
    actors: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    types: tuple[str, ...] = ()
    tool: str | None = None
    session_id: str | None = None
    outcome: str | None = None  # "error" | "ok": tool results that failed or did not
    limit: int = 100
    after: tuple[datetime, str, int] | None = field(default=None, compare=False)

    def described(self) -> dict[str, Any]:
        """What was asked, for the access log."""
        return {k: (v.isoformat() if isinstance(v, datetime) else list(v) if isinstance(v, tuple) else v)
                for k, v in self.__dict__.items() if v not in (None, ())}


def filters(tenant: str, query: AuditQuery) -> tuple[list[str], list[Any]]:
    """WHERE clauses (AND-ed) and their arguments, $1 first."""
    # tenant is also RLS's; said here too so the planner can use it as an index bound.
    where, args = ["tenant = $1"], [tenant]

    def add(clause: str, value: Any) -> None:
        args.append(value)
        where.append(clause.replace("?", f"${len(args)}"))

    if len(query.actors) == 1:  # equality keeps the index order; ANY would need a sort
        add("actor = ?", query.actors[0])
    elif query.actors:
        add("actor = ANY(?::text[])", list(query.actors))
    if query.since is not None:
        add("ts >= ?", query.since)
    if query.until is not None:
        add("ts < ?", query.until)
    if query.types:
        add("type = ANY(?::text[])", list(query.types))
    if query.tool is not None:
        add("tool_name = ?", query.tool)
    if query.session_id is not None:
        add("session_id = ?", query.session_id)
    if query.outcome is not None:
        add("is_error = ?", query.outcome == "error")
    return where, args


def events_sql(tenant: str, query: AuditQuery) -> tuple[str, list[Any]]:
    where, args = filters(tenant, query)
    if query.after is not None:
        args.extend(query.after)
        n = len(args)
        where.append(f"(ts, session_id, seq) > (${n - 2}, ${n - 1}, ${n})")
    args.append(query.limit)
    return (f"SELECT {SELECT_LIST} FROM events WHERE {' AND '.join(where)} "
            f"ORDER BY ts, session_id, seq LIMIT ${len(args)}"), args


def sessions_sql(tenant: str, query: AuditQuery) -> tuple[str, list[Any]]:
    where, args = filters(tenant, query)
    args.append(query.limit)
    return ("SELECT e.session_id, min(e.ts) AS first_ts, max(e.ts) AS last_ts, count(*) AS events, "
            "array_agg(DISTINCT e.type ORDER BY e.type) AS types, "
            "array_agg(DISTINCT e.actor ORDER BY e.actor) AS actors, s.owner, s.title, s.deleted_at, "
            "s.parent_session_id, s.fork_seq "
            f"FROM (SELECT session_id, ts, type, actor FROM events WHERE {' AND '.join(where)}) e "
            "LEFT JOIN sessions s ON s.session_id = e.session_id "
            "GROUP BY e.session_id, s.owner, s.title, s.deleted_at, s.parent_session_id, s.fork_seq "
            f"ORDER BY min(e.ts), e.session_id LIMIT ${len(args)}"), args


def encode_cursor(event: Event) -> str:
    raw = json.dumps([event.ts.isoformat(), event.session_id, event.seq]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str, int]:
    try:
        ts, session_id, seq = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not (is_plain_id(session_id) and is_position(seq)):  # never raw text or a huge int to Postgres
            raise ValueError("not a position this API issued")
        return utc_convertible(datetime.fromisoformat(ts)), session_id, seq
    except (ValueError, TypeError, binascii.Error) as err:
        raise BadCursor("cursor is not one this API issued; pass next_cursor from a previous page") from err
