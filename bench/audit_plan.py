"""How Postgres runs the gateway's audit query: EXPLAIN (ANALYZE, BUFFERS), both plan kinds.

asyncpg prepares each statement once per connection; Postgres plans its first five
executions for their arguments (custom plans), then may switch to one generic plan with
the arguments as parameters, pruning partitions at run time. Both are explained here:
the custom one through asyncpg with bound arguments, the generic one with a SQL-level
PREPARE under `plan_cache_mode = force_generic_plan` (EXPLAIN takes no bound parameters,
so its EXECUTE gets the arguments as literals). `plan_cache` reads which kind the timed
runs used.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from bench.audit_load import TENANT
from wakeline.storage.pg import TenantPool
from wakeline_gateway.audit.query import AuditQuery
from wakeline_gateway.read_model.audit import events_sql


async def explain_custom(pool: TenantPool, query: AuditQuery) -> list[str]:
    sql, args = events_sql(TENANT, query)
    async with pool.transaction(TENANT) as conn:
        return [row[0] for row in await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", *args)]


async def explain_generic(pool: TenantPool, query: AuditQuery) -> list[str]:
    sql, args = events_sql(TENANT, query)
    async with pool.transaction(TENANT) as conn:
        await conn.execute(f"PREPARE bench_audit_page AS {sql}")
        try:
            await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            literals = ", ".join(_literal(arg) for arg in args)
            rows = await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_audit_page({literals})")
        finally:
            await conn.execute("DEALLOCATE bench_audit_page")
    return [row[0] for row in rows]


async def plan_cache(pool: TenantPool, sql: str) -> dict[str, int]:
    """Generic and custom plans so far of `sql`, prepared on the pool's (single) connection."""
    async with pool.transaction(TENANT) as conn:
        row = await conn.fetchrow("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                                  "WHERE statement = $1", sql)
    return {"generic": row["generic_plans"], "custom": row["custom_plans"]} if row else {"generic": 0, "custom": 0}


def plan_summary(plan: list[str]) -> dict[str, Any]:
    text = "\n".join(plan)
    pruned = int(removed.group(1)) if (removed := re.search(r"Subplans Removed: (\d+)", text)) else 0
    return {"indexes": sorted(set(re.findall(r"Index (?:Only )?Scan using (\w+) on events_", text))),
            "partitions_planned": len(re.findall(r" on events_y\d{4}m\d{2}", text)) + pruned,
            "partitions_pruned_at_run_time": pruned,
            "partitions_read": len(re.findall(r" on events_y\d{4}m\d{2}.*\(actual time", text)),
            "sorts": len(re.findall(r"\bSort\b", text)),
            "buffers_hit": int(hits.group(1)) if (hits := re.search(r"Buffers: shared hit=(\d+)", text)) else 0,
            "execution_ms": float(re.search(r"Execution Time: ([\d.]+)", text).group(1))}


def _literal(value: Any) -> str:
    if isinstance(value, int):
        return str(value)
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return "'" + text.replace("'", "''") + "'"
