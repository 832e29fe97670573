"""Chain hashes stored as 32 bytes (0022), against the real Postgres.

A database archived before 0022 keeps every event exactly: after the migration each event
reads back equal to the one sealed (its hashes the same hex), its chain verifies, and the key
registry holds the same hashes. A stored hash no writer could have made stops the migration,
which names it and changes nothing. After 0022 a hash that is not 32 bytes is refused, and a
writer refuses to store a hash spelled any other way than `seal` spells it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from conftest_pg import (
    INSERT_EVENT_BEFORE_0022, connected, database_before, fresh_tenant, insert_event_as, new_event,
    require_postgres, service_connection, set_tenant,
)
from tests.factories import Stamps, at, draft, sealed
from wakeline.storage.event_rows import EVENT_COLUMNS, event_from_row, event_row, hash_bytes
from wakeline.storage.event_statements import SELECT_SESSION
from wakeline.contract.events import Event
from wakeline.storage.migrate import apply_migrations
from wakeline.evidence.verify import verify_session

pytestmark = pytest.mark.postgres

CREATED = draft("session_created", "cmd-create", config={}, owner="user:ann")


def _now(n: int) -> Stamps:
    """Live event ids (uuids, as the column wants) a second apart, ending a minute ago."""
    start = datetime.now(UTC) - timedelta(minutes=1)
    return at([start + timedelta(seconds=k) for k in range(n)])


async def _insert_as_text(conn: asyncpg.Connection, events: list[Event]) -> None:
    """The rows as a writer before 0022 stored them: the hashes as hex text."""
    async with conn.transaction():
        await set_tenant(conn, events[0].tenant)
        await conn.execute("SELECT ensure_events_partition($1)", events[0].ts)
        for event in events:
            placeholder = event.model_copy(update={"prev_hash": "0" * 64, "hash": "0" * 64})
            row = dict(zip(EVENT_COLUMNS, event_row(placeholder)))
            row["prev_hash"], row["hash"] = event.prev_hash, event.hash  # as they are, text
            await conn.execute(INSERT_EVENT_BEFORE_0022, *(row[c] for c in EVENT_COLUMNS))


async def test_events_archived_before_0022_read_back_exactly_and_verify(tmp_path: Path) -> None:
    await require_postgres()
    tenant = fresh_tenant()
    events = sealed([CREATED, draft("user_message", text="hi"), draft("turn_started", turn=1)],
                    tenant=tenant, stamps=_now(3))
    async with database_before(22, tmp_path) as dsn:
        async with connected(dsn) as conn:
            await _insert_as_text(conn, events)
        applied = await apply_migrations(dsn)
        assert applied[0] == "0022_hash_bytes" and all(int(m[:4]) > 22 for m in applied[1:])
        async with connected(dsn) as conn:
            async with conn.transaction():
                await set_tenant(conn, tenant)
                back = [event_from_row(r) for r in await conn.fetch(SELECT_SESSION, events[0].session_id)]
                keys = await conn.fetch("SELECT encode(hash, 'hex') AS hash, octet_length(hash) AS n FROM event_keys "
                                        "WHERE session_id = $1 ORDER BY seq", events[0].session_id)
                report = await verify_session(conn, events[0].session_id)
            types = {r["column_name"]: r["data_type"] for r in await conn.fetch(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name IN ('events', 'event_keys') AND column_name IN ('hash', 'prev_hash')")}
    assert back == events
    assert [(k["hash"], k["n"]) for k in keys] == [(e.hash, 32) for e in events]
    assert report.ok and report.events == 3, report
    assert types == {"hash": "bytea", "prev_hash": "bytea"}


async def test_a_hash_no_writer_makes_stops_the_migration_and_is_named(tmp_path: Path) -> None:
    await require_postgres()
    tenant = fresh_tenant()
    events = sealed([CREATED, draft("user_message", text="hi")], tenant=tenant, stamps=_now(2))
    shouted = events[1].model_copy(update={"hash": events[1].hash.upper()})
    async with database_before(22, tmp_path) as dsn:
        async with connected(dsn) as conn:
            await _insert_as_text(conn, [events[0], shouted])
        named = f"events holds a hash .* \\(session {events[0].session_id}, seq 2\\)"
        with pytest.raises(asyncpg.DataError, match=named):
            await apply_migrations(dsn)
        async with connected(dsn) as conn:  # the failed migration changed nothing
            assert await conn.fetchval("SELECT max(version) FROM schema_migrations") == 21
            assert await conn.fetchval("SELECT data_type FROM information_schema.columns "
                                       "WHERE table_name = 'events' AND column_name = 'hash'") == "text"


async def test_a_hash_of_another_length_is_refused_and_a_writer_takes_only_seal_s_spelling() -> None:
    await require_postgres()
    tenant = fresh_tenant()
    async with service_connection() as conn:
        with pytest.raises(asyncpg.CheckViolationError, match="events_hash_sha256"):
            await insert_event_as(conn, tenant, new_event(tenant, f"short-{uuid.uuid4().hex[:8]}", hash="ab" * 31))
    good = "0123456789abcdef" * 4
    assert hash_bytes(good).hex() == good
    for spelled in (good.upper(), " ".join(good[i:i + 2] for i in range(0, 64, 2)), good[:62], good + "00"):
        with pytest.raises(ValueError, match="not a chain hash"):
            hash_bytes(spelled)
