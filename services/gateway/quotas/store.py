"""`QuotaStore`: the tenant's quotas and their history in Postgres (migration 0026). Not
`events` or `sessions`, so the SQL lives here, beside its use. The count that admits commands
is shared with the brain: `wakeline.storage.quota_counts`.

The quotas are written only by upsert: a trigger appends each change, old and new, to
`tenant_quota_changes`, which nobody can change or delete. The operator's ceilings
(`tenant_quota_ceilings`, migration 0030) are only read here: the service role cannot write
them; `wakeline quotas ceiling` does, as the schema owner (`wakeline.ops.quota_ceilings`).
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from wakeline.storage.pg import TenantPool
from wakeline.contract.quotas import QUOTA_NAMES, QuotaValues

HISTORY = 100  # the newest changes a read returns
_COLUMNS = ", ".join(QUOTA_NAMES)
UPSERT = (f"INSERT INTO tenant_quotas (tenant, {_COLUMNS}, set_by, set_at) "
          f"VALUES ($1, {', '.join(f'${n}' for n in range(2, len(QUOTA_NAMES) + 2))}, "
          f"${len(QUOTA_NAMES) + 2}, now()) ON CONFLICT (tenant) DO UPDATE SET "
          + ", ".join(f"{c} = EXCLUDED.{c}" for c in (*QUOTA_NAMES, "set_by", "set_at")))
CURRENT = f"SELECT {_COLUMNS}, set_by, set_at FROM tenant_quotas WHERE tenant = $1"
CEILINGS = f"SELECT {_COLUMNS} FROM tenant_quota_ceilings WHERE tenant = $1"
CHANGES = ("SELECT old, new, set_by, set_at FROM (SELECT * FROM tenant_quota_changes WHERE tenant = $1 "
           "ORDER BY id DESC LIMIT $2) newest ORDER BY id")


class QuotaStore:
    def __init__(self, pool: TenantPool):
        self._pool = pool

    async def read(self, tenant: str) -> dict[str, Any]:
        """The tenant's own quotas (None: the default applies), who set them, the newest changes, and
        the operator's ceilings (None: the default is the ceiling)."""
        async with self._pool.transaction(tenant) as conn:
            return await _read(conn, tenant)

    async def set(self, tenant: str, values: QuotaValues, by: str) -> dict[str, Any]:
        """Replaces the tenant's quotas (a missing one: back to the default) and reads them back."""
        async with self._pool.transaction(tenant) as conn:
            await conn.execute(UPSERT, tenant, *(values.get(name) for name in QUOTA_NAMES), by)
            return await _read(conn, tenant)


async def _read(conn: asyncpg.Connection, tenant: str) -> dict[str, Any]:
    current = await conn.fetchrow(CURRENT, tenant)
    changes = await conn.fetch(CHANGES, tenant, HISTORY)
    ceilings = await conn.fetchrow(CEILINGS, tenant)
    own = {name: current[name] if current else None for name in QUOTA_NAMES}
    return {"own": own, "ceilings": {name: ceilings[name] if ceilings else None for name in QUOTA_NAMES},
            "set_by": current["set_by"] if current else None,
            "set_at": current["set_at"] if current else None,
            "history": [{"old": json.loads(r["old"]) if r["old"] is not None else None, "new": json.loads(r["new"]),
                         "set_by": r["set_by"], "set_at": r["set_at"]} for r in changes]}
