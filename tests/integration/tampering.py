"""Changing rows behind the database's back, as a superuser would, for the tamper tests
(test_tamper.py, test_postgres_forks.py, test_evidence.py, test_gateway_reads.py): the
append-only guards off for one transaction, then on again. It holds no tests itself."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import asyncpg
import pytest

from conftest_pg import superuser_connection
from tests.requirements import missing
from wakeline.contract.events import Event


@asynccontextmanager
async def superuser() -> AsyncIterator[asyncpg.Connection]:
    """conftest's superuser connection; its skip (not root, no local cluster) fails under CI."""
    try:
        async with superuser_connection() as conn:
            yield conn
    except pytest.skip.Exception as skipped:
        missing(f"the tamper tests need the local cluster's superuser: {skipped}")


async def _always_triggers(conn: asyncpg.Connection, tables: list[str]) -> list[tuple[str, str]]:
    rows = await conn.fetch("SELECT tgrelid::regclass::text AS t, tgname FROM pg_trigger "
                            "WHERE tgrelid = ANY($1::regclass[]) AND NOT tgisinternal AND tgenabled = 'A' "
                            # In the order given (partition before event_keys), the order an
                            # insert locks them: by name, event_keys came first and could deadlock.
                            "ORDER BY array_position($1::regclass[], tgrelid), 2", tables)
    return [(r["t"], r["tgname"]) for r in rows]


@asynccontextmanager
async def tampering(conn: asyncpg.Connection, events: Sequence[Event]) -> AsyncIterator[str]:
    """As superuser, in one transaction: the guard triggers of the events' partition,
    event_keys and checkpoints off, the block's changes, the triggers back on as ALWAYS.
    Yields the partition's name; the block changes rows there, not through `events`.

    A superuser bypasses RLS; session_replication_role = replica would not skip ALWAYS
    triggers, so they are disabled by name. Other sessions never see them off: the
    ALTERs hold their locks until commit. Only the one partition is locked (a statement
    on `events` without a ts bound would lock every partition, and deadlock with a
    retention job detaching one).
    """
    async with conn.transaction():
        # Locks in the order an insert takes them (events, its partition, event_keys via the
        # trigger): the UPDATE below would otherwise take events last and deadlock with one.
        await conn.execute("LOCK TABLE ONLY events IN ROW EXCLUSIVE MODE")
        partitions = {await conn.fetchval("SELECT ensure_events_partition($1)", e.ts) for e in events}
        assert len(partitions) == 1, "the test session spans a month boundary"
        tables = [*partitions, "event_keys", "checkpoints"]
        guards = await _always_triggers(conn, tables)
        for table, trigger in guards:
            await conn.execute(f'ALTER TABLE {table} DISABLE TRIGGER "{trigger}"')
        yield partitions.pop()
        for table, trigger in guards:
            await conn.execute(f'ALTER TABLE {table} ENABLE ALWAYS TRIGGER "{trigger}"')
        assert await _always_triggers(conn, tables) == guards


@asynccontextmanager
async def guards_off(conn: asyncpg.Connection, tables: Sequence[str]) -> AsyncIterator[None]:
    """As superuser, in one transaction: the ALWAYS guard triggers of `tables` (named, in the
    order an insert locks them) off for the block, then on again."""
    async with conn.transaction():
        await conn.execute("LOCK TABLE ONLY events IN ROW EXCLUSIVE MODE")
        guards = await _always_triggers(conn, list(tables))
        for table, trigger in guards:
            await conn.execute(f'ALTER TABLE {table} DISABLE TRIGGER "{trigger}"')
        yield
        for table, trigger in guards:
            await conn.execute(f'ALTER TABLE {table} ENABLE ALWAYS TRIGGER "{trigger}"')
