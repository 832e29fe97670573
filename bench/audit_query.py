"""Audit query by actor and time range over 1M events: page latency (p50, p99) and its plan.

The query is the gateway's own, `AuditStore.events` (keyset-paged, ORDER BY ts,
session_id, seq), called directly through a one-connection `TenantPool`, so every run
reuses the connection and asyncpg's prepared statement as a warm gateway would; HTTP is
not in the figure. The cases run round-robin, WARMUP rounds then RUNS timed ones; each
timed call is followed by the same SQL in the same kind of transaction without decoding
the rows into events (`sql_p50`), so the database's share is visible. The data (tenant
`bench-audit`) is loaded by audit_load on the first run and reused after.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from bench.audit_load import TENANT, ensure_loaded, storage_per_event
from bench.audit_plan import explain_custom, explain_generic, plan_cache, plan_summary
from bench.audit_sessions import AGENT
from bench.harness import summary
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings
from wakeline_gateway.audit.query import AuditQuery
from wakeline_gateway.audit.store import AuditStore
from wakeline_gateway.read_model.audit import events_sql

WARMUP, RUNS = 20, 200
EMPTY = "empty_transaction"


def _day(month: int, day: int) -> datetime:
    return datetime(2026, month, day, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Case:
    name: str
    query: AuditQuery
    page: int = 1  # > 1: the page reached by following cursors from the first


ALICE_7D = AuditQuery(actors=("user:alice",), since=_day(6, 10), until=_day(6, 17))
ALICE_30D = AuditQuery(actors=("user:alice",), since=_day(6, 15), until=_day(7, 15))
CASES = (
    Case("first_page_7d", ALICE_7D),
    Case("first_page_30d", ALICE_30D),  # two monthly partitions
    Case("page_10_30d", ALICE_30D, page=10),
    Case("sparse_actor_30d", replace(ALICE_30D, actors=("user:person-250",))),  # fewer rows than a page
    Case("busiest_actor_7d", replace(ALICE_7D, actors=(AGENT,))),  # ~45% of all events
)


async def _at_page(store: AuditStore, case: Case) -> AuditQuery:
    """The case's query with the cursor a client holds after reading the pages before `page`."""
    if case.page == 1:
        return case.query
    before = await store.events(TENANT, replace(case.query, limit=case.query.limit * (case.page - 1)))
    last = before[-1]
    return replace(case.query, after=(last.ts, last.session_id, last.seq))


async def _time_once(pool: TenantPool, store: AuditStore, query: AuditQuery) -> tuple[float, float, int]:
    """Milliseconds of the store call and of its SQL alone (same transaction shape), and the rows."""
    sql, args = events_sql(TENANT, query)
    started = time.perf_counter()
    rows = len(await store.events(TENANT, query))
    paged = time.perf_counter()
    async with pool.transaction(TENANT) as conn:
        await conn.fetch(sql, *args)
    return (paged - started) * 1000, (time.perf_counter() - paged) * 1000, rows


async def _time_empty_transaction(pool: TenantPool) -> float:
    """The floor under every page: BEGIN, set the tenant, one trivial query, COMMIT."""
    started = time.perf_counter()
    async with pool.transaction(TENANT) as conn:
        await conn.fetchval("SELECT 1")
    return (time.perf_counter() - started) * 1000


async def _time_cases(pool: TenantPool, store: AuditStore, queries: dict[str, AuditQuery]) -> dict[str, dict]:
    """Round-robin over the cases (and the empty transaction), so machine noise falls on all alike."""
    timings: dict[str, list] = {name: [] for name in queries}
    empty = []
    for run in range(WARMUP + RUNS):
        for name, query in queries.items():
            timed = await _time_once(pool, store, query)
            if run >= WARMUP:
                timings[name].append(timed)
        floor = await _time_empty_transaction(pool)
        if run >= WARMUP:
            empty.append(floor)
    results = {name: {"rows": runs[-1][2], **summary([page for page, _, _ in runs]),
                      "sql_p50": summary([sql for _, sql, _ in runs])["p50"]} for name, runs in timings.items()}
    return {**results, EMPTY: summary(empty)}


async def _page_lines(pool: TenantPool, case: Case, query: AuditQuery, timed: dict) -> list[dict]:
    generic, custom = await explain_generic(pool, query), await explain_custom(pool, query)
    return [{"bench": "audit_page_ms", "case": case.name, "actor": query.actors[0], "page": case.page,
             "since": query.since.isoformat(), "until": query.until.isoformat(), **timed,
             "generic_plan": plan_summary(generic), "custom_plan": plan_summary(custom)},
            {"bench": "audit_plan", "case": case.name, "kind": "generic", "plan": generic}]


async def run() -> list[dict]:
    settings = CommonSettings()
    loaded = await ensure_loaded(settings.postgres_dsn)
    results = [{"bench": "audit_data", "tenant": TENANT, **loaded, "loadavg_1m": round(os.getloadavg()[0], 2)}]
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=1) as pool:
        store = AuditStore(pool)
        queries = {case.name: await _at_page(store, case) for case in CASES}
        statements = {events_sql(TENANT, query)[0] for query in queries.values()}
        before = [await plan_cache(pool, sql) for sql in statements]
        timed = await _time_cases(pool, store, queries)
        after = [await plan_cache(pool, sql) for sql in statements]
        for case in CASES:
            results += await _page_lines(pool, case, queries[case.name], timed[case.name])
    plans = {kind: sum(a[kind] - b[kind] for a, b in zip(after, before)) for kind in ("generic", "custom")}
    return results + [await storage_per_event(), {"bench": "audit_empty_transaction_ms", **timed[EMPTY]},
                      {"bench": "audit_plans_used", "scope": "warm-up and timed runs", **plans,
                       "loadavg_1m": round(os.getloadavg()[0], 2)}]


if __name__ == "__main__":
    for line in asyncio.run(run()):
        print(json.dumps(line), flush=True)
