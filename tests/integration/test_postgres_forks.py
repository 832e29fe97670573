"""The database holds a fork's `forked` event to a real point of its parent's log (0016),
verify checks a fork's chain from there and its prefix in the parent (a prefix row a
superuser changed is reported at its seq), and when retention drops the month the prefix
lived in, verify and the reads say that part is gone."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
import pytest

from conftest_pg import fresh_month, fresh_tenant, owner_connection, require_postgres, service_connection, set_tenant
from tampering import superuser, tampering
from tests.factories import LIVE, SPEAKERS, at, draft, sealed
from tests.unit.session_log import created, exchange
from wakeline.evidence import verify
from wakeline.storage.event_statements import insert_events
from wakeline.contract.events import ForkedPayload, SessionConfig
from wakeline.storage.lineage import PrefixUnavailable, prefix_events
from wakeline.ops.retention import RetentionSettings, apply_retention

pytestmark = pytest.mark.postgres
DAY = timedelta(days=1)


async def set_policy(tenant: str, keep: str) -> None:
    """An admin's retention window for `tenant`, as test_retention sets one."""
    async with owner_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        await conn.execute(
            "INSERT INTO retention_policies (tenant, keep, set_by) VALUES ($1, $2::text::interval, 'admin:test') "
            "ON CONFLICT (tenant) DO UPDATE SET keep = EXCLUDED.keep, set_at = now()", tenant, keep)


async def _stored(tenant: str, events: list) -> None:
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        for ts in {e.ts for e in events}:
            await conn.execute("SELECT ensure_events_partition($1)", ts)
        await insert_events(conn, events)


def _fork_of(parent: list, at: int, *, parent_hash: str | None = None, seq_shift: int = 0) -> list:
    link = parent[at - 1].hash if parent_hash is None else parent_hash
    payload = ForkedPayload(parent_session_id=parent[0].session_id, fork_seq=at, parent_hash=link,
                            config=SessionConfig(), owner=SPEAKERS.user)
    after = parent[at - 1].model_copy(update={"hash": link, "seq": at + seq_shift})
    return sealed([draft(payload, "cmd-fork"), draft("user_message", "cmd-f", text="again")],
                  tenant=parent[0].tenant, after=after, stamps=LIVE)


async def _parent() -> list:
    await require_postgres()
    tenant = fresh_tenant()
    parent = sealed([created(), *exchange(1)], tenant=tenant, stamps=LIVE)
    await _stored(tenant, parent)
    return parent


async def test_a_fork_linked_to_its_parents_hash_is_stored_and_verifies_with_its_prefix():
    parent = await _parent()
    fork = _fork_of(parent, 8)
    await _stored(parent[0].tenant, fork)
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, parent[0].tenant)
        report = await verify.verify_session(conn, fork[0].session_id)
    assert report.ok and report.events == 2 and report.last_seq == 10
    assert report.prefix is not None and report.prefix.ok and report.prefix.events == 8
    assert report.prefix.parent_session_id == parent[0].session_id


async def _verified(tenant: str, session_id: str) -> verify.Report:
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        return await verify.verify_session(conn, session_id)


async def test_a_parents_prefix_row_changed_behind_the_databases_back_fails_the_forks_verify_at_its_seq():
    parent = await _parent()
    tenant, parent_id = parent[0].tenant, parent[0].session_id
    before, after = _fork_of(parent, 3), _fork_of(parent, 8)  # seq 5 is after one's fork point, in the other's
    await _stored(tenant, before)
    await _stored(tenant, after)
    assert (await _verified(tenant, after[0].session_id)).ok
    async with superuser() as conn, tampering(conn, parent) as partition:
        changed = await conn.execute(
            f"UPDATE {partition} SET payload = jsonb_set(payload, '{{input,cmd}}', '\"rm -rf /\"') "
            "WHERE session_id = $1 AND seq = 5", parent_id)
    assert changed == "UPDATE 1" and parent[4].type == "tool_call"

    report = await _verified(tenant, after[0].session_id)
    assert not report.ok and report.prefix is not None and not report.prefix.ok
    assert (report.prefix.parent_session_id, report.prefix.parent.first_bad_seq) == (parent_id, 5)
    assert report.prefix.parent.reason.startswith("hash mismatch")
    # The fork's own report names the inherited problem at its fork point, with the cause.
    assert report.first_bad_seq == 8 and report.reason.startswith(f"inherited prefix from {parent_id}: hash mismatch")
    assert [p.seq for p in report.problems] == [8]  # its own rows still link and hash
    # A fork taken before the changed row inherits nothing of it.
    assert (await _verified(tenant, before[0].session_id)).ok
    assert (await _verified(tenant, parent_id)).first_bad_seq == 5


@pytest.mark.parametrize("how, error", [
    ("another hash", asyncpg.ForeignKeyViolationError),   # a point the parent's log does not hold
    ("another seq", asyncpg.CheckViolationError),          # not right after the fork point
    ("another tenant", asyncpg.ForeignKeyViolationError),  # a parent of another tenant
])
async def test_the_database_refuses_a_forked_event_that_names_no_real_fork_point(how, error):
    parent = await _parent()
    if how == "another hash":
        fork = _fork_of(parent, 8, parent_hash="ab" * 32)
    elif how == "another seq":
        fork = _fork_of(parent, 6, seq_shift=1)
    else:
        fork = [e.model_copy(update={"tenant": fresh_tenant()}) for e in _fork_of(parent, 8)]
    with pytest.raises(error):
        await _stored(fork[0].tenant, fork[:1])


async def test_when_retention_drops_the_month_of_a_forks_prefix_verify_and_reads_say_it_is_gone():
    await require_postgres()
    name, start, end = await fresh_month()
    tenant = fresh_tenant()
    drafts = [created(), *exchange(1)]
    parent = sealed(drafts, tenant=tenant, stamps=at([start + DAY + timedelta(minutes=i) for i in range(8)]))
    await _stored(tenant, parent)
    fork = _fork_of(parent, 8)  # the fork's own events are of today
    await _stored(tenant, fork)
    await set_policy(tenant, "1 day")
    dropped = await apply_retention(RetentionSettings().postgres_maintenance_dsn, None, end + DAY)
    assert any(entry["partition_name"] == name for entry in dropped)

    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        report = await verify.verify_session(conn, fork[0].session_id)
        with pytest.raises(PrefixUnavailable, match="seq 1 of"):
            await prefix_events(conn, parent[0].session_id, 8)
    assert report.ok and report.events == 2  # its own chain holds, linked to the registered hash at 8
    assert report.prefix is not None and report.prefix.retained_out == 8 and report.prefix.events == 0
