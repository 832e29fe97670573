"""heads.stored_heads (session_keys and a probe of event_keys per session, 0020) returns
exactly what the DISTINCT ON over events it replaced returned, against the real Postgres: for
the tenant set on the connection only, for a session whose log does not start at seq 1 (a
fork's), and after retention dropped a session's head, or all of a session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conftest_pg import (
    fresh_month, fresh_session_id, fresh_tenant, insert_event_as, maintenance_connection, new_event,
    require_postgres, service_connection, set_tenant,
)
from wakeline.evidence.heads import STORED_HEADS, STORED_HEADS_BY_SCAN, Head, stored_heads

pytestmark = pytest.mark.postgres

DAY = timedelta(days=1)


async def _heads_both_ways(tenant: str, viewer: str = "") -> tuple[dict[str, Head], dict[str, Head]]:
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        await conn.execute("SELECT set_config('wakeline.viewer', $1, true)", viewer)
        return await stored_heads(conn), await stored_heads(conn, query=STORED_HEADS_BY_SCAN)


async def _insert(tenant: str, session_id: str, seqs: range, at: datetime) -> list[dict[str, Any]]:
    events = [new_event(tenant, session_id, seq, ts=at + timedelta(minutes=seq)) for seq in seqs]
    async with service_connection() as conn:
        for event in events:
            await insert_event_as(conn, tenant, event)
    return events


def _head(event: dict[str, Any]) -> Head:
    return Head(seq=event["seq"], hash=event["hash"])


async def test_the_skip_scan_returns_the_old_querys_heads_and_no_other_tenants() -> None:
    await require_postgres()
    ours, theirs = fresh_tenant(), fresh_tenant()
    now = datetime.now(UTC) - DAY
    expected: dict[str, dict[str, Head]] = {ours: {}, theirs: {}}
    # Interleaved: the other tenant's session ids sort between ours, so a walk that left the
    # tenant's part of the index would pick them up.
    for i, length in enumerate([1, 5, 2, 9, 3, 4]):
        tenant = (ours, theirs)[i % 2]
        session = f"{fresh_session_id()[:8]}-heads-{i}"
        events = await _insert(tenant, session, range(1, length + 1), now)
        expected[tenant][session] = _head(events[-1])
    # A fork's own log starts past seq 1 (0016); its session is registered all the same.
    late = f"{fresh_session_id()[:8]}-heads-late"
    expected[ours][late] = _head((await _insert(ours, late, range(4, 7), now))[-1])
    for tenant in (ours, theirs):
        new, old = await _heads_both_ways(tenant)
        assert new == old == expected[tenant]
    empty_new, empty_old = await _heads_both_ways(fresh_tenant())
    assert empty_new == empty_old == {}


async def test_the_skip_scan_honours_the_viewer_like_the_old_query() -> None:
    await require_postgres()
    tenant, now = fresh_tenant(), datetime.now(UTC) - DAY
    await _insert(tenant, fresh_session_id(), range(1, 4), now)
    new, old = await _heads_both_ways(tenant, viewer="user:nobody-owns-this")
    assert new == old == {}  # events' viewer_owns (0006): no sessions row owned by that viewer


@pytest.fixture
async def two_months() -> AsyncIterator[tuple[tuple[str, datetime, datetime], tuple[str, datetime, datetime]]]:
    await require_postgres()
    first = await fresh_month()
    while (second := await fresh_month()) == first:
        pass
    try:
        yield first, second
    finally:
        async with maintenance_connection() as conn:  # no far-past month is left behind
            for name, _, end in (first, second):
                if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"public.{name}"):
                    await conn.fetchrow("SELECT * FROM drop_events_partition($1, $2, $3)", name, end + DAY, DAY)


async def test_after_a_retention_drop_the_heads_are_still_the_events_rows_not_the_tombstones(two_months) -> None:
    (dropped, dropped_start, dropped_end), (_, kept_start, _) = two_months
    tenant = fresh_tenant()
    whole = fresh_session_id()  # every event in the dropped month: no head any more
    await _insert(tenant, whole, range(1, 4), dropped_start + DAY)
    split = fresh_session_id()  # 1..2 dropped, 3..4 kept: head 4 either way
    await _insert(tenant, split, range(1, 3), dropped_start + DAY)
    split_events = await _insert(tenant, split, range(3, 5), kept_start + DAY)
    # Its last seq in the dropped month, earlier ones in the kept one (ts need not follow seq):
    # event_keys' head (seq 3) is a tombstone, so the head is the last row events still holds.
    backwards = fresh_session_id()
    backwards_events = await _insert(tenant, backwards, range(1, 3), kept_start + DAY)
    await _insert(tenant, backwards, range(3, 4), dropped_start + DAY)
    before_new, before_old = await _heads_both_ways(tenant)
    assert before_new == before_old and set(before_new) == {whole, split, backwards}
    async with maintenance_connection() as conn:
        await conn.fetchrow("SELECT * FROM drop_events_partition($1, $2, $3)", dropped, dropped_end + DAY, DAY)
    new, old = await _heads_both_ways(tenant)
    assert new == old == {split: _head(split_events[-1]), backwards: _head(backwards_events[-1])}


async def test_the_query_walks_the_index_not_the_events() -> None:
    """The plan, so a lost index (or a rewrite the planner cannot walk) fails here, not at 1M events.

    The suite's tables are small enough that a scan and a sort can be the cheapest plan, so
    those are priced out: what is checked is that the walk over the index is available.
    """
    await require_postgres()
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, fresh_tenant())
        await conn.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
        plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + STORED_HEADS))
    assert "session_keys_pkey" in plan and "event_keys_pkey" in plan, plan
