"""What the archive holds, read straight from Postgres as the service role: rows, a session's
events, and the check every e2e test ends on."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import asyncpg

from wakeline.log.chain import first_broken_seq
from wakeline.storage.event_rows import event_from_row
from wakeline.storage.event_statements import SELECT_SESSION
from wakeline.contract.events import Event
from wakeline.runtime.settings import CommonSettings


def pg_rows(sql: str, *args: Any, tenant: str = "default") -> list[asyncpg.Record]:
    async def query() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(CommonSettings().postgres_dsn)
        try:
            async with conn.transaction():
                await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", tenant)
                return await conn.fetch(sql, *args)
        finally:
            await conn.close()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(query())
    # A loop already runs in this thread (Playwright's sync API keeps one while a module's
    # browser is open): asyncio.run would refuse, so the query gets a thread of its own.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, query()).result()


def stored_events(session_id: str, tenant: str = "default") -> list[Event]:
    return [event_from_row(r) for r in pg_rows(SELECT_SESSION, session_id, tenant=tenant)]


def assert_log_whole(session_id: str, tenant: str = "default") -> list[Event]:
    """Every event once, seq dense from 1, hash chain valid: what every e2e test ends on."""
    events = stored_events(session_id, tenant)
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), f"seq not dense: {seqs}"
    assert first_broken_seq(events) is None
    return events
