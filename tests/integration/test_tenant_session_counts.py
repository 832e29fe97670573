"""tenant_session_counts (0027): every tenant's open sessions by status, for the gateway's
`wakeline_tenant_sessions`, against the real Postgres. The service role gets counts across
tenants through it, and still no row of another tenant; ended and deleted sessions are left out,
and a status the projection learns later (`queued`) is counted as it comes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conftest_pg import fresh_session_id, fresh_tenant, require_postgres, service_connection, set_tenant

pytestmark = pytest.mark.postgres

INSERT = ("INSERT INTO sessions (tenant, session_id, owner, status, last_seq, last_hash, created_at, updated_at) "
          "VALUES ($1, $2, 'user:a', $3, 1, 'h', $4, $4)")


async def test_counts_each_tenants_open_sessions_by_status_and_nothing_else() -> None:
    await require_postgres()
    ours, theirs, now = fresh_tenant(), fresh_tenant(), datetime.now(UTC)
    planted = {ours: ["running", "running", "idle", "queued", "ended", "deleted"], theirs: ["waiting_client", "ended"]}
    async with service_connection() as conn:
        for tenant, statuses in planted.items():
            async with conn.transaction():
                await set_tenant(conn, tenant)
                for status in statuses:
                    await conn.execute(INSERT, tenant, fresh_session_id(), status, now)
        counted = await conn.fetch("SELECT tenant, status, sessions FROM tenant_session_counts() "
                                   "WHERE tenant = ANY($1)", [ours, theirs])
        # and the function opened nothing for the connection: no tenant set, no row visible
        seen = await conn.fetchval("SELECT count(*) FROM sessions WHERE tenant = ANY($1)", [ours, theirs])
    assert {(r["tenant"], r["status"]): r["sessions"] for r in counted} == {
        (ours, "running"): 2, (ours, "idle"): 1, (ours, "queued"): 1, (theirs, "waiting_client"): 1}
    assert seen == 0
