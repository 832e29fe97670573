"""Shared harness for the gateway's integration tests; it holds no tests itself.

No brain runs here, so sessions are seeded by sealing events with `tests.factories` (as a
running brain would: now, fresh ids) and inserting them, with the `sessions` row the
archiver would project, as the service role through `TenantPool`.
Commands are checked on `wakeline.inbox` with a fresh group-less consumer positioned at
the end. Isolation is by fresh session ids and a fresh tenant per run.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from aiokafka.structs import ConsumerRecord, TopicPartition

from conftest_pg import INSERT_EVENT, fresh_tenant, owner_connection, require_kafka, require_postgres  # noqa: F401
from wakeline.storage import api_keys
from tests import factories
from tests.factories import LIVE, Speakers
from wakeline.log.chain import Draft
from wakeline.contract.commands import CommandBase, parse_command
from wakeline.storage.event_rows import event_row
from wakeline.contract.events import Event
from wakeline.transport.kafka_io import make_consumer
from wakeline.storage.pg import TenantPool
from wakeline.log.status import SESSION_COLUMNS, advance
from wakeline.contract.topics import INBOX, partition_for
from wakeline_gateway.app import create_app
from wakeline_gateway.settings import GatewaySettings

# user:local is the principal of the harness's API key: the sessions it seeds are its own.
SPEAKERS = Speakers(user="user:local", agent="agent:scripted:demo", runner="runner:test-host")
OWNER = SPEAKERS.user
draft = SPEAKERS.draft
# The row the archiver would hold (wakeline.log.status.advance over the log), written as is.
UPSERT_SESSION = (
    f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)}) VALUES "
    f"({', '.join(f'${i}' for i in range(1, len(SESSION_COLUMNS) + 1))}) ON CONFLICT (session_id) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in ("title", "status", "last_seq", "last_hash", "updated_at",
                                                  "ended_reason", "deleted_at", "deleted_by")))


class HarnessSettings(GatewaySettings):
    """The gateway's settings plus the tenant this test's keys belong to."""

    tenant: str


def gateway_settings(**overrides: Any) -> HarnessSettings:
    # No signer's public key unless a test gives one: the checkout's own .data/signer (left
    # by `make demo`) must not decide what these gateways verify.
    values: dict[str, Any] = dict(tenant=fresh_tenant(), wait_timeout_s=2.0, stream_poll_s=0.05,
                                  evidence_public_key_file=Path("/nonexistent/wakeline-tests/signer.key.pub"))
    values.update(overrides)
    return HarnessSettings(**values)


async def api_key(tenant: str, principal: str, role: str) -> str:
    """A real key, created the way `wakeline keys create` does (as the schema owner)."""
    async with owner_connection() as conn:
        key, _ = await api_keys.create(conn, tenant, principal, role, note="integration test")
    return key


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@asynccontextmanager
async def running_gateway(settings: HarnessSettings, principal: str = OWNER.split(":", 1)[1],
                          role: str = "user") -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """The real app with its lifespan (pool + producer), called in-process over ASGI, with a
    client that presents a `role` key of `principal` in `settings.tenant`."""
    await require_postgres()
    await require_kafka(settings)
    app = create_app(settings)
    headers = bearer(await api_key(settings.tenant, principal, role))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway", timeout=30,
                                     headers=headers) as client:
            yield app, client


def sealed(drafts: list[Draft], session_id: str, tenant: str, after: Event | None = None) -> list[Event]:
    return factories.sealed(drafts, session_id, tenant=tenant, after=after, stamps=LIVE)


def created(title: str | None = None, **config: Any) -> Draft:
    config.setdefault("model", "scripted:demo")
    return draft("session_created", f"cmd-{uuid.uuid4()}", config=config, owner=OWNER, title=title)


class Seeder:
    """Writes events and the projected `sessions` row the way the archiver would."""

    def __init__(self, pool: TenantPool, tenant: str):
        self.pool, self.tenant = pool, tenant

    async def session(self, drafts: list[Draft], session_id: str | None = None) -> list[Event]:
        return await self.append(session_id or str(uuid.uuid4()), drafts, [])

    async def append(self, session_id: str, drafts: list[Draft], history: list[Event]) -> list[Event]:
        events = sealed(drafts, session_id, self.tenant, history[-1] if history else None)
        await self.insert(history + events, events)
        return history + events

    async def insert(self, log: list[Event], new: list[Event]) -> None:
        row = None
        for event in log:
            row = advance(row, event)
        async with self.pool.transaction(self.tenant) as conn:
            for event in new:
                await conn.execute("SELECT ensure_events_partition($1)", event.ts)
                await conn.execute(INSERT_EVENT, *event_row(event))
            await conn.execute(UPSERT_SESSION, *(getattr(row, c) for c in SESSION_COLUMNS))


class InboxWatcher:
    """A group-less consumer of every inbox partition, from where the log ended at start."""

    def __init__(self, settings: GatewaySettings):
        self._settings = settings
        self._consumer = make_consumer(settings, group_id=None)
        self._partitions = settings.partitions
        self.seen: list[ConsumerRecord] = []

    async def __aenter__(self) -> InboxWatcher:
        await self._consumer.start()
        parts = [TopicPartition(INBOX, p) for p in range(self._partitions)]
        self._consumer.assign(parts)
        await self._consumer.seek_to_end(*parts)
        for tp in parts:  # resolve the lazy seek now, before anything is sent
            await self._consumer.position(tp)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._consumer.stop()

    async def records_for(self, session_id: str, count: int = 1, timeout_s: float = 10.0) -> list[ConsumerRecord]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            mine = [r for r in self.seen if r.key == session_id.encode()]
            if len(mine) >= count or loop.time() > deadline:
                return mine
            batches = await self._consumer.getmany(timeout_ms=200)
            self.seen += [record for batch in batches.values() for record in batch]

    async def commands_for(self, session_id: str, count: int = 1, timeout_s: float = 10.0) -> list[CommandBase]:
        return [parse_command(r.value) for r in await self.records_for(session_id, count, timeout_s)]

    async def up_to_now(self, session_id: str) -> list[ConsumerRecord]:
        """The session's records on the inbox up to where its partition's log ends now: what
        "nothing was sent" is checked against, instead of a window of time. The gateway answers
        only once Kafka has acknowledged what it sent, so a command sent for an answer already
        received lies below that end: read up to it, the watcher has seen it, or it was never
        sent. The log end, not the read-committed one: a brain's open transaction on the
        partition (a reroute) would hold that below the command."""
        tp = TopicPartition(INBOX, partition_for(session_id, self._partitions))
        ends = make_consumer(self._settings, group_id=None, isolation_level="read_uncommitted")
        await ends.start()
        try:
            end = (await ends.end_offsets([tp]))[tp]
        finally:
            await ends.stop()
        async with asyncio.timeout(30):
            while await self._consumer.position(tp) < end:
                batches = await self._consumer.getmany(tp, timeout_ms=200)
                self.seen += [record for batch in batches.values() for record in batch]
        return [record for record in self.seen if record.key == session_id.encode()]


class FakeInbox:
    """Stands in for `wakeline.inbox` where a test plays the brain.

    A test that records the brain's answer itself must keep its commands off the real
    inbox: a live brain (another stack on the same broker) would wake the session and
    sequence its own event at the same seq, and the archiver rightly refuses a second
    history. Whether commands reach Kafka is tested separately, without answers.
    """

    def __init__(self) -> None:
        self.sent: list[CommandBase] = []
        self._answered: set[str] = set()
        self._arrived = asyncio.Condition()

    async def submit(self, command: CommandBase) -> None:
        async with self._arrived:
            self.sent.append(command)
            self._arrived.notify_all()

    def commands_for(self, session_id: str) -> list[CommandBase]:
        return [c for c in self.sent if c.session_id == session_id]

    async def next_unanswered(self, session_id: str, timeout_s: float = 10.0) -> CommandBase:
        def unanswered() -> list[CommandBase]:
            return [c for c in self.commands_for(session_id) if c.command_id not in self._answered]

        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(unanswered), timeout_s)
            command = unanswered()[0]
            self._answered.add(command.command_id)
        return command


async def answer_command(inbox: FakeInbox, seeder: Seeder, session_id: str, history: list[Event],
                         respond: Callable[[CommandBase], list[Draft]]) -> list[Event]:
    """Plays the brain once: waits for the session's next command, records `respond`'s drafts."""
    command = await inbox.next_unanswered(session_id)
    drafts = [d.model_copy(update={"causation_id": command.command_id}) for d in respond(command)]
    return await seeder.append(session_id, drafts, history)
