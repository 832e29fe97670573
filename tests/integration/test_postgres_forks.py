"""The database holds a fork's `forked` event to a real point of its parent's log (0016),
and verify checks a fork's chain from there and its prefix in the parent."""

from __future__ import annotations

import asyncpg
import pytest

from conftest_pg import fresh_tenant, require_postgres, service_connection, set_tenant
from tests.factories import LIVE, SPEAKERS, draft, sealed
from tests.unit.session_log import created, exchange
from wakeline import verify
from wakeline.event_store import insert_events
from wakeline.events import ForkedPayload, SessionConfig

pytestmark = pytest.mark.postgres


async def _stored(tenant: str, events: list) -> None:
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, tenant)
        await conn.execute("SELECT ensure_events_partition(now())")
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
