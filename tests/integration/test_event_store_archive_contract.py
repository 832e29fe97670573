"""One contract, two event stores, for the archiver's writes and the brain's wake reads.

What `EventStore.archive`, `park`, `parked`, `archived_offsets`, `wake_read` and `prefix`
do, run against `PostgresEventStore` (the real tables) and `MemoryEventStore` (the twin
the brain's and the archiver's unit tests run on). Isolation is by fresh tenants, session
ids and archiver groups.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from conftest_pg import fresh_session_id, fresh_tenant, postgres_event_store, service_connection, set_tenant
from tests.factories import LIVE, draft, sealed
from wakeline.contract.events import Event, SessionConfig
from wakeline.log.fold import fold
from wakeline.log.snapshots import snapshot_payload
from wakeline.log.status import SessionRow
from wakeline.storage.archive_rules import BrokenChain, ConflictingEvent
from wakeline.storage.event_store import ArchiveAt, EventStore, ParkedSession
from wakeline.storage.lineage import PrefixUnavailable
from wakeline.storage.memory_store import MemoryEventStore

TOPIC = "test-archive-contract"


def session_log(tenant: str, turns: int = 2, snapshots: bool = False) -> list[Event]:
    """A created session and `turns` user messages, a snapshot after each turn with `snapshots`."""
    sid = fresh_session_id()
    log = sealed([draft("session_created", "cmd-create", config={}, owner="user:ann")], sid, tenant=tenant,
                 stamps=LIVE)
    for turn in range(turns):
        log += sealed([draft("user_message", f"cmd-{turn}", text=f"message {turn}")], sid, tenant=tenant,
                      after=log[-1], stamps=LIVE)
        if snapshots:
            log += sealed([draft(snapshot_payload(fold(log)))], sid, tenant=tenant, after=log[-1], stamps=LIVE)
    return log


def fork_of(parent: list[Event], at_seq: int) -> list[Event]:
    forked = draft("forked", "cmd-fork", parent_session_id=parent[0].session_id, fork_seq=at_seq,
                   parent_hash=parent[at_seq - 1].hash, config=SessionConfig(), owner="user:ann")
    return sealed([forked], fresh_session_id(), tenant=parent[0].tenant, after=parent[at_seq - 1], stamps=LIVE)


def group() -> str:
    return f"test-contract-{uuid.uuid4().hex[:10]}"


class ArchiveContract:
    """The cases every backend passes. Subclasses provide `store` and `session_row`."""

    @pytest.fixture
    async def store(self) -> AsyncIterator[EventStore]:
        raise NotImplementedError
        yield

    async def session_row(self, store: EventStore, tenant: str, session_id: str) -> SessionRow | None:
        raise NotImplementedError

    async def test_a_batch_stores_its_events_moves_its_sessions_row_and_its_offsets(self, store: EventStore) -> None:
        tenant, g = fresh_tenant(), group()
        log = session_log(tenant)
        assert await store.archive(g, log[:2], {(TOPIC, 3): 10}) == 2
        assert await store.archive(g, log, {(TOPIC, 3): 12, (TOPIC, 4): 1}) == 1  # the first two: redelivered
        assert await store.archive(g, log, {(TOPIC, 3): 11}) == 0                  # offsets never go back
        assert await store.archived_offsets(g, [TOPIC]) == {(TOPIC, 3): 12, (TOPIC, 4): 1}
        assert await store.archived_offsets(group(), [TOPIC]) == {}
        row = await self.session_row(store, tenant, log[0].session_id)
        assert row is not None and (row.last_seq, row.last_hash, row.owner) == (3, log[-1].hash, "user:ann")

    @pytest.mark.parametrize("refusal", ["conflict", "gap"])
    async def test_a_batch_the_rules_refuse_stores_nothing_not_even_its_offsets(
            self, store: EventStore, refusal: str) -> None:
        tenant, g = fresh_tenant(), group()
        log, bystander = session_log(tenant), session_log(tenant)
        await store.archive(g, log[:2], {(TOPIC, 0): 2})
        if refusal == "conflict":
            bad, raised = sealed([draft("user_message", "cmd-x", text="another history")], log[0].session_id,
                                 tenant=tenant, after=log[0], stamps=LIVE), ConflictingEvent
        else:
            bad, raised = sealed([draft("user_message", "cmd-y", text="after a gap")], log[0].session_id, tenant=tenant,
                         after=log[2], stamps=LIVE), BrokenChain  # seq 4, and seq 3 never archived
        with pytest.raises(raised):
            await store.archive(g, [*bystander, *bad], {(TOPIC, 0): 9})
        assert await store.archived_offsets(g, [TOPIC]) == {(TOPIC, 0): 2}
        assert await self.session_row(store, tenant, bystander[0].session_id) is None
        assert (await self.session_row(store, tenant, log[0].session_id)).last_seq == 2  # type: ignore[union-attr]

    async def test_a_session_id_held_by_another_tenant_is_refused(self, store: EventStore) -> None:
        owner, intruder, g = fresh_tenant(), fresh_tenant(), group()
        log = session_log(owner)
        await store.archive(g, log[:2], {})
        claim = sealed([draft("user_message", "cmd-z", text="mine now")], log[0].session_id, tenant=intruder,
                       after=log[1], stamps=LIVE)
        with pytest.raises(Exception):  # noqa: B017 - each backend names it its own way; what matters is refusal
            await store.archive(g, claim, {})
        assert (await self.session_row(store, owner, log[0].session_id)).last_seq == 2  # type: ignore[union-attr]

    async def test_a_wake_reads_from_the_newest_snapshot_under_the_owner_and_where_the_archive_stands(
            self, store: EventStore) -> None:
        owner, g = fresh_tenant(), group()
        log = session_log(owner, turns=3, snapshots=True)
        sid = log[0].session_id
        await store.archive(g, log, {(TOPIC, 2): 40})
        snapshot_at = max(e.seq for e in log if e.type == "snapshot")
        read = await store.wake_read(sid, fresh_tenant(), ArchiveAt(g, TOPIC, 2))  # claimed by another tenant
        assert (read.owner, read.next_offset, read.parked) == (owner, 40, None)
        assert [e.seq for e in read.events] == [e.seq for e in log if e.seq >= snapshot_at]
        whole = await store.wake_read(sid, owner, ArchiveAt(g, TOPIC, 2), whole=True)
        assert whole.events == log
        unknown = await store.wake_read(fresh_session_id(), owner, ArchiveAt(g, TOPIC, 5))
        assert (unknown.owner, unknown.events, unknown.next_offset) == (None, [], 0)

    async def test_a_parked_session_wakes_to_where_it_was_parked_and_nothing_else(self, store: EventStore) -> None:
        tenant, g = fresh_tenant(), group()
        log = session_log(tenant)
        sid = log[0].session_id
        await store.archive(g, log[:2], {})
        parked = ParkedSession(tenant, sid, 3, "conflicting event", TOPIC, 1, 7)
        await store.park(g, [parked], {(TOPIC, 1): 8})
        await store.park(g, [parked._replace(from_seq=9, reason="later")], {})  # the first parking stands
        assert await store.parked([(tenant, sid), (tenant, fresh_session_id())]) == [parked]
        assert await store.archived_offsets(g, [TOPIC]) == {(TOPIC, 1): 8}
        read = await store.wake_read(sid, tenant, ArchiveAt(g, TOPIC, 1))
        assert read.parked is not None and (read.parked.from_seq, read.parked.reason) == (3, "conflicting event")
        assert read.events == []

    async def test_a_forks_prefix_is_its_parents_history_through_forks_of_forks(self, store: EventStore) -> None:
        tenant, g = fresh_tenant(), group()
        parent = session_log(tenant, turns=3)
        child = fork_of(parent, 3)
        child += sealed([draft("user_message", "cmd-c", text="child")], child[0].session_id, tenant=tenant,
                        after=child[-1], stamps=LIVE)
        await store.archive(g, parent, {})  # a fork is sealed from an archived prefix: the parent comes first
        await store.archive(g, child, {})
        assert await store.prefix(tenant, parent[0].session_id, 3) == parent[:3]
        assert await store.prefix(tenant, child[0].session_id, 5) == parent[:3] + child
        with pytest.raises(PrefixUnavailable):
            await store.prefix(tenant, parent[0].session_id, 9)
        with pytest.raises(PrefixUnavailable):
            await store.prefix(fresh_tenant(), parent[0].session_id, 3)  # another tenant sees none of it


class TestPostgresArchive(ArchiveContract):
    pytestmark = pytest.mark.postgres

    @pytest.fixture
    async def store(self) -> AsyncIterator[EventStore]:
        async with postgres_event_store() as store:
            yield store

    async def session_row(self, store: EventStore, tenant: str, session_id: str) -> SessionRow | None:
        async with service_connection() as conn, conn.transaction():
            await set_tenant(conn, tenant)
            row = await conn.fetchrow("SELECT * FROM sessions WHERE session_id = $1", session_id)
        return SessionRow(**{k: row[k] for k in SessionRow.__dataclass_fields__}) if row else None


class TestMemoryArchive(ArchiveContract):
    @pytest.fixture
    async def store(self) -> AsyncIterator[EventStore]:
        yield MemoryEventStore()

    async def session_row(self, store: EventStore, tenant: str, session_id: str) -> SessionRow | None:
        assert isinstance(store, MemoryEventStore)
        row = store.sessions.get(session_id)
        return row if row is not None and row.tenant == tenant else None
