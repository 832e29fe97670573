"""An actor's audit page reads about a page of index entries, not every match (0023).

The audit-by-actor index is `(tenant, actor, ts)`; pages are in `(ts, session_id, seq)`
order, which an incremental sort gives per run of equal ts. Against the real Postgres: one
actor's 1,200 events interleaved with another's in one month, then the gateway's own
statement (`events_sql`) for a first page and for the page after its cursor, explained with
ANALYZE. Each must scan the actor index, read at most a page and a few entries from it, and
return the rows in keyset order. Without the index (or with one the order cannot use) the
scan reads every match, and this fails.

The rows are analyzed first, as autovacuum does at every 10% of a partition's growth:
with no statistics for them the planner takes the 1,200 matches for a few, sorts them all
and reads all 1,200 (the wider 0006 index gave the order whatever the statistics).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conftest_pg import (
    fresh_session_id, fresh_tenant, new_event, owner_connection, require_postgres, row_values, service_connection,
    set_tenant,
)
from wakeline.storage.event_statements import INSERT_ROWS
from wakeline_gateway.audit.query import AuditQuery
from wakeline_gateway.read_model.audit import events_sql

pytestmark = pytest.mark.postgres

PAGE = 40
PER_ACTOR = 1_200


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in _nodes(child))]


async def _page(conn: Any, tenant: str, query: AuditQuery) -> tuple[list[Any], list[dict[str, Any]]]:
    sql, args = events_sql(tenant, query)
    rows = await conn.fetch(sql, *args)
    explained = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *args)
    plan = (json.loads(explained) if isinstance(explained, str) else explained)[0]["Plan"]
    return rows, _nodes(plan)


def _actor_index_reads(nodes: list[dict[str, Any]]) -> int:
    scans = [n for n in nodes if n.get("Index Name", "").endswith("tenant_actor_ts_idx")]
    assert scans, f"the page did not use the actor index: {[n['Node Type'] for n in nodes]}"
    return sum(int(n["Actual Rows"]) * int(n["Actual Loops"]) for n in scans)


async def test_an_actors_pages_read_about_a_page_of_the_actor_index() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    start = (datetime.now(UTC) - timedelta(days=2)).replace(microsecond=0)
    events = []
    for actor, offset in (("user:audited", 0), ("user:other", 1)):
        sessions = [fresh_session_id() for _ in range(7)]
        for n in range(PER_ACTOR):  # the two actors alternate in time, seven sessions each
            events.append(new_event(tenant, sessions[n % 7], 1 + n // 7, actor=actor,
                                    ts=start + timedelta(seconds=2 * n + offset)))
    query = AuditQuery(actors=("user:audited",), since=start, until=start + timedelta(days=3), limit=PAGE)
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        for at in (start, events[-1]["ts"]):
            await conn.execute("SELECT ensure_events_partition($1)", at)
        await conn.execute(INSERT_ROWS, *(list(c) for c in zip(*(row_values(e) for e in events))))
    async with owner_connection() as conn:
        await conn.execute("ANALYZE events")
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        first, first_plan = await _page(conn, tenant, query)
        last = first[-1]
        second, second_plan = await _page(conn, tenant, AuditQuery(
            actors=query.actors, since=query.since, until=query.until, limit=PAGE,
            after=(last["ts"], last["session_id"], last["seq"])))
    audited = sorted((e for e in events if e["actor"] == "user:audited"), key=lambda e: (e["ts"], e["session_id"]))
    assert [(r["ts"], r["session_id"]) for r in first + second] == [
        (e["ts"], e["session_id"]) for e in audited[:2 * PAGE]]
    assert _actor_index_reads(first_plan) <= PAGE + 2
    assert _actor_index_reads(second_plan) <= PAGE + 2
