"""Audit queries across the sessions of a tenant, and the access log of who ran them.

Pages are keyset-paged in (ts, session_id, seq) order, which is total and stable: a
cursor names the last row seen, never an offset, so a page is as cheap deep in the log as
at its start and no row is skipped or repeated while the log grows (an event archived
later with an older ts than the cursor is, by construction, not in a later page: exports
of a window still being written should end at a past `until`). With tenant and one actor
fixed, the `events_tenant_actor_ts` index (0023) yields rows in ts order and an incremental
sort orders each run of equal ts, so a first page reads about `limit` index entries per
month instead of sorting every match.

Audit reads see deleted sessions too: deletion hides a session from its users, not from
the evidence.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from wakeline.storage.event_store import SELECT_LIST, event_from_row, is_error, tool_name
from wakeline.contract.events import Event
from wakeline.storage.pg import TenantPool
from wakeline_gateway.bounds import is_plain_id, is_position, utc_convertible

EXPORT_PAGE = 1000
CSV_COLUMNS = ("ts", "session_id", "seq", "type", "actor", "tool_name", "is_error", "trust",
               "event_id", "causation_id", "prev_hash", "hash", "payload")
# A spreadsheet runs a cell starting with one of these as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


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


def csv_cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def csv_header() -> str:
    return _csv_line(CSV_COLUMNS)


def csv_row(event: Event) -> str:
    data = event.model_dump(mode="json")
    values = {**data, "payload": json.dumps(data["payload"], ensure_ascii=False, sort_keys=True),
              "tool_name": tool_name(event), "is_error": is_error(event)}
    return _csv_line(csv_cell(values.get(column)) for column in CSV_COLUMNS)


def _csv_line(cells: Any) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(cells)
    return out.getvalue()


# Model calls of the tenant in [since, until), summed per (session owner, model, UTC day)
# and per token count the calls recorded (every integer field of `usage`: cache tokens too).
# A model call is a model turn or a summary the model wrote for a compaction (its actor is
# agent:<model> and it records its usage), as a session's own cost (`cost.session_cost`) counts.
COST_SQL = """
SELECT s.owner AS actor, substr(e.actor, 7) AS model, (e.ts AT TIME ZONE 'UTC')::date AS day,
       u.key AS token, sum(u.value::bigint) AS tokens, count(*) AS calls
FROM events e JOIN sessions s ON s.session_id = e.session_id,
     jsonb_each_text(coalesce(e.payload->'usage', '{}'::jsonb)) AS u
WHERE (e.type = 'model_turn' OR (e.type = 'compaction' AND e.payload ? 'summary_model'))
  AND e.actor LIKE 'agent:%' AND e.ts >= $1 AND e.ts < $2
  AND u.value ~ '^[0-9]+$'
GROUP BY 1, 2, 3, 4 ORDER BY 3, 1, 2, 4
"""


class AuditStore:
    def __init__(self, pool: TenantPool):
        self._pool = pool

    async def events(self, tenant: str, query: AuditQuery) -> list[Event]:
        sql, args = events_sql(tenant, query)
        async with self._pool.transaction(tenant) as conn:
            rows = await conn.fetch(sql, *args)
        return [event_from_row(row) for row in rows]

    async def every_event(self, tenant: str, query: AuditQuery) -> AsyncIterator[Event]:
        """Every match, a keyset page per transaction (a long export holds no snapshot)."""
        page_query = AuditQuery(**{**query.__dict__, "limit": EXPORT_PAGE})
        while True:
            page = await self.events(tenant, page_query)
            for event in page:
                yield event
            if len(page) < EXPORT_PAGE:
                return
            last = page[-1]
            page_query = AuditQuery(**{**page_query.__dict__, "after": (last.ts, last.session_id, last.seq)})

    async def sessions(self, tenant: str, query: AuditQuery) -> list[asyncpg.Record]:
        """The sessions the query's events touch, each with when and how much."""
        sql, args = sessions_sql(tenant, query)
        async with self._pool.transaction(tenant) as conn:
            return await conn.fetch(sql, *args)

    async def cost(self, tenant: str, since: datetime, until: datetime) -> list[dict[str, Any]]:
        """Tokens and model calls per (owner, model, day) over [since, until)."""
        async with self._pool.transaction(tenant) as conn:
            rows = await conn.fetch(COST_SQL, since, until)
        groups: dict[tuple[str, str, Any], dict[str, Any]] = {}
        for r in rows:
            group = groups.setdefault((r["actor"], r["model"], r["day"]), {
                "actor": r["actor"], "model": r["model"], "day": r["day"], "calls": 0, "tokens": {}})
            group["tokens"][r["token"]] = r["tokens"]
            group["calls"] = max(group["calls"], r["calls"])
        return list(groups.values())

    async def record_access(self, tenant: str, principal: str, role: str, key_id: str,
                            method: str, path: str, asked: dict[str, Any]) -> None:
        """Appends to the access log; committed before the answer starts."""
        async with self._pool.transaction(tenant) as conn:
            await conn.execute(
                "INSERT INTO audit_access_log (tenant, principal, role, key_id, method, path, query) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)",
                tenant, principal, role, key_id, method, path, json.dumps(asked, sort_keys=True, default=str))

    async def access_log(self, tenant: str, since: datetime | None, until: datetime | None,
                         principal: str | None, limit: int, after_id: int | None) -> list[dict[str, Any]]:
        async with self._pool.transaction(tenant) as conn:
            rows = await conn.fetch(
                "SELECT id, principal, role, key_id, at, method, path, query FROM audit_access_log "
                "WHERE ($1::timestamptz IS NULL OR at >= $1) AND ($2::timestamptz IS NULL OR at < $2) "
                "AND ($3::text IS NULL OR principal = $3) AND ($4::bigint IS NULL OR id > $4) "
                "ORDER BY id LIMIT $5", since, until, principal, after_id, limit)
        return [{**dict(row), "query": json.loads(row["query"])} for row in rows]

    async def retention(self, tenant: str) -> dict[str, Any]:
        """The tenant's window (None: only the operator's default applies) and its history."""
        async with self._pool.transaction(tenant) as conn:
            current = await conn.fetchrow(
                "SELECT extract(epoch FROM keep) / 86400 AS keep_days, set_by, set_at "
                "FROM retention_policies WHERE tenant = $1", tenant)
            history = await conn.fetch(
                "SELECT extract(epoch FROM keep) / 86400 AS keep_days, set_by, set_at "
                "FROM retention_policy_changes ORDER BY id", )
        return {"keep_days": float(current["keep_days"]) if current else None,
                "set_by": current["set_by"] if current else None, "set_at": current["set_at"] if current else None,
                "history": [{**dict(r), "keep_days": float(r["keep_days"])} for r in history]}

    async def set_retention(self, tenant: str, keep_days: int, by: str) -> None:
        """Upserts the window; the database appends the change to retention_policy_changes."""
        async with self._pool.transaction(tenant) as conn:
            await conn.execute(
                "INSERT INTO retention_policies (tenant, keep, set_by, set_at) "
                "VALUES ($1, make_interval(days => $2), $3, now()) ON CONFLICT (tenant) DO UPDATE "
                "SET keep = EXCLUDED.keep, set_by = EXCLUDED.set_by, set_at = EXCLUDED.set_at",
                tenant, keep_days, by)
