"""One contract, two event stores: `PostgresEventStore` (the real table) and `MemoryEventStore`.

`EventStoreContract` states what any `wakeline.storage.event_store.EventStore` does; each backend
is a subclass that says how to build one and how to plant a row no writer would store.
Only the Postgres run says anything about Postgres; the memory run keeps its twin honest
for the fast tests that use it. Isolation is by fresh tenants and session ids.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conftest_pg import (
    fresh_session_id, fresh_tenant, insert_event_as, new_event, postgres_event_store, service_connection,
)
from wakeline.log.chain import Draft, seal
from wakeline.storage.event_store import EventQuery, EventStore, Scope
from wakeline.contract.events import (
    GENESIS_HASH, CorruptEvent, Event, ModelTurnPayload, SessionCreatedPayload, SessionConfig,
    ToolCallPayload, ToolResultPayload, UserMessagePayload,
)
from wakeline.storage.memory_store import MemoryEventStore

USER, AGENT, RUNNER = "user:alice", "agent:scripted:default", "runner:host-1"


def drafts() -> list[Draft]:
    """Six events of one session, some caused by commands (one under an idempotency key)."""
    return [
        Draft(payload=SessionCreatedPayload(config=SessionConfig(), owner=USER), actor=USER, trust="instruction",
              causation_id="cmd-create"),
        Draft(payload=UserMessagePayload(text="list the files"), actor=USER, trust="instruction",
              causation_id="key-1.abc"),
        Draft(payload=ModelTurnPayload(text="Let me look.", tool_call_ids=("tc-1",)), actor=AGENT,
              trust="instruction", causation_id="key-1.abc"),
        Draft(payload=ToolCallPayload(tool_call_id="tc-1", name="bash", input={"cmd": "ls"}), actor=AGENT,
              trust="instruction"),
        Draft(payload=ToolResultPayload(tool_call_id="tc-1", name="bash", output="a\n", is_error=True),
              actor=RUNNER, trust="data", causation_id="tc-1"),
        Draft(payload=ModelTurnPayload(text="One file."), actor=AGENT, trust="instruction",
              causation_id="key-10.def"),
    ]


def sealed(tenant: str, session_id: str, first_seq: int = 1, prev_hash: str = GENESIS_HASH,
           items: list[Draft] | None = None) -> list[Event]:
    events, t0 = [], datetime.now(UTC)
    for seq, draft in enumerate(items or drafts(), start=first_seq):
        event = seal(draft, session_id=session_id, tenant=tenant, seq=seq, prev_hash=prev_hash,
                     ts=t0 + timedelta(milliseconds=seq), event_id=str(uuid.uuid4()))
        events.append(event)
        prev_hash = event.hash
    return events


class EventStoreContract:
    """The cases every backend passes. Subclasses provide `store` and `plant_invalid`."""

    @pytest.fixture
    async def store(self) -> AsyncIterator[EventStore]:
        raise NotImplementedError
        yield

    async def plant_invalid(self, store: EventStore, tenant: str, session_id: str, seq: int) -> None:
        """Stores a row at `seq` whose payload is not its type's."""
        raise NotImplementedError

    async def test_appended_events_read_back_equal_hash_for_hash(self, store: EventStore) -> None:
        tenant, session_id = fresh_tenant(), fresh_session_id()
        events = sealed(tenant, session_id)
        appended = await store.append(events)
        assert appended.new == tuple((session_id, e.seq) for e in events)
        assert (appended.present, appended.conflicts) == ((), ())
        back = await store.read(Scope(tenant), session_id, EventQuery(limit=100))
        assert back == events
        assert [e.hash for e in back] == [e.hash for e in events]

    async def test_appending_the_same_events_again_is_a_no_op_reported_as_present(self, store: EventStore) -> None:
        tenant, session_id = fresh_tenant(), fresh_session_id()
        events = sealed(tenant, session_id)
        await store.append(events[:4])
        appended = await store.append(events)
        assert appended.new == tuple((session_id, e.seq) for e in events[4:])
        assert appended.present == tuple((session_id, e.seq) for e in events[:4])
        assert appended.conflicts == ()
        assert await store.read(Scope(tenant), session_id, EventQuery()) == events

    async def test_another_event_at_a_stored_seq_is_a_conflict_and_not_stored(self, store: EventStore) -> None:
        tenant, session_id = fresh_tenant(), fresh_session_id()
        events = sealed(tenant, session_id)
        await store.append(events[:3])
        another = Draft(payload=ModelTurnPayload(text="another history"), actor=AGENT, trust="instruction")
        other = sealed(tenant, session_id, first_seq=3, prev_hash=events[1].hash, items=[another])
        appended = await store.append([*other, events[3]])
        assert appended.conflicts == ((session_id, 3),)
        assert appended.new == ((session_id, 4),)
        assert await store.read(Scope(tenant), session_id, EventQuery()) == events[:4]

    async def test_pages_by_after_before_and_limit_in_seq_order(self, store: EventStore) -> None:
        tenant, session_id = fresh_tenant(), fresh_session_id()
        events = sealed(tenant, session_id)
        await store.append(events)
        scope = Scope(tenant)
        assert await store.read(scope, session_id, EventQuery(after=2, limit=2)) == events[2:4]
        assert await store.read(scope, session_id, EventQuery(before=5, limit=2)) == events[2:4]
        assert await store.read(scope, session_id, EventQuery(after=1, before=5, limit=10)) == events[1:4]
        assert await store.read(scope, session_id, EventQuery(after=6)) == []

    async def test_filters_by_type(self, store: EventStore) -> None:
        tenant, session_id = fresh_tenant(), fresh_session_id()
        events = sealed(tenant, session_id)
        await store.append(events)
        found = await store.read(Scope(tenant), session_id, EventQuery(types=("model_turn", "tool_result")))
        assert found == [events[2], events[4], events[5]]
        last = await store.read(Scope(tenant), session_id, EventQuery(before=7, limit=1, types=("model_turn",)))
        assert last == [events[5]]

    async def test_another_tenant_reads_nothing(self, store: EventStore) -> None:
        tenant, session_id = fresh_tenant(), fresh_session_id()
        await store.append(sealed(tenant, session_id))
        other = Scope(fresh_tenant())
        assert await store.read(other, session_id, EventQuery()) == []
        assert await store.first_caused_by(other, session_id, "cmd-create") is None
        assert await store.first_caused_under(other, session_id, "key-1") is None
        assert await store.last_seq(other, session_id) == 0

    async def test_first_caused_by_an_exact_id_or_under_a_key_prefix(self, store: EventStore) -> None:
        tenant, session_id = fresh_tenant(), fresh_session_id()
        events = sealed(tenant, session_id)
        await store.append(events)
        scope = Scope(tenant)
        assert await store.first_caused_by(scope, session_id, "key-1.abc") == events[1]
        assert await store.first_caused_by(scope, session_id, "key-1") is None
        assert await store.first_caused_under(scope, session_id, "key-1") == events[1]
        # A prefix only up to the dot: key-10's commands are not key-1's.
        assert await store.first_caused_under(scope, session_id, "key-10") == events[5]
        assert await store.first_caused_under(scope, session_id, "cmd-create") == events[0]
        assert await store.first_caused_under(scope, session_id, "key-2") is None

    async def test_last_seq_is_the_highest_stored_or_zero(self, store: EventStore) -> None:
        tenant, session_id = fresh_tenant(), fresh_session_id()
        assert await store.last_seq(Scope(tenant), session_id) == 0
        await store.append(sealed(tenant, session_id)[:5])
        assert await store.last_seq(Scope(tenant), session_id) == 5

    async def test_a_stored_row_that_is_no_event_raises_corrupt_event_with_its_seq(self, store: EventStore) -> None:
        tenant, session_id = fresh_tenant(), fresh_session_id()
        events = sealed(tenant, session_id)[:2]
        await store.append(events)
        await self.plant_invalid(store, tenant, session_id, 3)
        with pytest.raises(CorruptEvent) as raised:
            await store.read(Scope(tenant), session_id, EventQuery())
        assert raised.value.seq == 3
        assert await store.read(Scope(tenant), session_id, EventQuery(before=3)) == events


def invalid_row(tenant: str, session_id: str, seq: int) -> dict[str, Any]:
    return new_event(tenant, session_id, seq, type="tool_result", payload={"not": "a tool result"})


class TestPostgresEventStore(EventStoreContract):
    pytestmark = pytest.mark.postgres

    @pytest.fixture
    async def store(self) -> AsyncIterator[EventStore]:
        async with postgres_event_store() as store:
            yield store

    async def plant_invalid(self, store: EventStore, tenant: str, session_id: str, seq: int) -> None:
        # The service role may insert any row of its tenant; only readers judge it.
        async with service_connection() as conn:
            await insert_event_as(conn, tenant, invalid_row(tenant, session_id, seq))


class TestMemoryEventStore(EventStoreContract):
    @pytest.fixture
    async def store(self) -> AsyncIterator[EventStore]:
        yield MemoryEventStore()

    async def plant_invalid(self, store: EventStore, tenant: str, session_id: str, seq: int) -> None:
        assert isinstance(store, MemoryEventStore)
        store.plant(**invalid_row(tenant, session_id, seq))
