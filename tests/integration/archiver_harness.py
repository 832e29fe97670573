"""Shared harness for the archiver's integration tests; it holds no tests itself.

No brain runs here: events are sealed by `tests.factories` as a running brain would (now,
fresh ids) and produced the way the brain does, keyed by session id, inside a Kafka
transaction. In-process archivers get their own consumer group, data dir and a pair of
private topics, so that the records a test writes (malformed ones, conflicting ones)
never reach any other archiver; an archiver run as a process uses the real topics and
starts where the archive's offsets are seeded, at their current end. Isolation is by
fresh ids; nothing is truncated.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import NewTopic
from aiokafka.structs import TopicPartition

from conftest_pg import fresh_tenant, require_kafka, require_postgres
from tests.factories import LIVE, Speakers, sealed
from tests.private_broker import held_partitions
from wakeline.log.chain import Draft
from wakeline.contract.events import Event
from wakeline.storage.event_statements import session_events
from wakeline.transport.kafka_io import kafka_auth, make_admin, send_keyed
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings
from wakeline_archiver.app import run
from wakeline_archiver.settings import ArchiverSettings
from wakeline_archiver.stream import ArchivedTopics

T = TypeVar("T")
# The archive's projection tests read these names back from the sessions table.
SPEAKERS = Speakers(user="user:test", agent="agent:scripted:test", runner="runner:test-host")
OWNER = SPEAKERS.user


async def require_stack(settings: ArchiverSettings) -> None:
    """Skip when Kafka or Postgres is unreachable, fail when CI=true."""
    await require_postgres()
    await require_kafka(settings)


def archiver_settings(data_root: Path, **overrides: Any) -> ArchiverSettings:
    group = f"test-archiver-{uuid.uuid4().hex[:12]}"
    values: dict[str, Any] = dict(archiver_group=group, archiver_data_dir=data_root / group,
                                  archiver_batch_window_s=0.05, archiver_lag_log_interval_s=1.0)
    values.update(overrides)
    return ArchiverSettings(**values)


# -- topics ------------------------------------------------------------------------------

@asynccontextmanager
async def private_topics(settings: ArchiverSettings) -> AsyncIterator[ArchivedTopics]:
    """A fresh events topic and dead-letter topic, deleted afterwards."""
    base = f"wakeline-test-archiver-{uuid.uuid4().hex[:10]}"
    topics = ArchivedTopics(events=f"{base}.events", dead_letter=f"{base}.dead-letter")
    admin = make_admin(settings)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, settings.partitions, 1) for t in (topics.events, topics.dead_letter)])
        yield topics
    finally:
        try:
            await admin.delete_topics([topics.events, topics.dead_letter])
        finally:
            await admin.close()


async def end_offsets(settings: ArchiverSettings, topic: str) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(settings.partitions)]
        return {tp.partition: offset for tp, offset in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


async def seed_offsets_at_end(settings: ArchiverSettings, pool: TenantPool, *topics: str) -> None:
    """Stores the current ends as the archive's offsets, so the group starts there."""
    async with pool.system_transaction() as conn:
        for topic in topics:
            for partition, offset in (await end_offsets(settings, topic)).items():
                await conn.execute(
                    "INSERT INTO archiver_offsets (consumer_group, topic, partition, next_offset) "
                    "VALUES ($1, $2, $3, $4)", settings.archiver_group, topic, partition, offset)


# -- the archiver ------------------------------------------------------------------------

class InProcessArchiver:
    def __init__(self, settings: ArchiverSettings, topics: ArchivedTopics):
        self.settings, self.topics = settings, topics
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(run(settings, self.stop, topics), name=settings.archiver_group)

    async def stopped(self, timeout: float = 30) -> None:
        self.stop.set()
        await asyncio.wait_for(asyncio.shield(self.task), timeout)


@asynccontextmanager
async def running_archiver(settings: ArchiverSettings, topics: ArchivedTopics) -> AsyncIterator[InProcessArchiver]:
    archiver = InProcessArchiver(settings, topics)
    try:
        yield archiver
    finally:
        if not archiver.task.done():
            await archiver.stopped()


# -- events ------------------------------------------------------------------------------

def draft(type_: str, **payload: Any) -> Draft:
    """A draft in this harness's cast, caused by a fresh command id."""
    return SPEAKERS.draft(type_, f"cmd-{uuid.uuid4()}", **payload)


def created(title: str | None = None) -> Draft:
    return draft("session_created", config={"model": "scripted:test"}, owner=OWNER, title=title)


def turn(n: int, tool: str = "bash", is_error: bool = False) -> list[Draft]:
    call_id = f"call-{uuid.uuid4().hex[:8]}"
    return [draft("user_message", text=f"do step {n}"), draft("turn_started", turn=n),
            draft("model_turn", text="on it", tool_call_ids=(call_id,)),
            draft("tool_call", tool_call_id=call_id, name=tool, input={"cmd": "true"}),
            draft("tool_result", tool_call_id=call_id, name=tool, output="ok", is_error=is_error),
            draft("turn_ended", turn=n)]


class Session:
    """A session's log as the brain would seal it: dense seqs, a whole chain."""

    def __init__(self, tenant: str | None = None, session_id: str | None = None):
        self.tenant = tenant or fresh_tenant()
        self.session_id = session_id or str(uuid.uuid4())
        self.events: list[Event] = []

    def seal(self, drafts: Sequence[Draft]) -> list[Event]:
        new = sealed(drafts, self.session_id, tenant=self.tenant, after=self.events[-1] if self.events else None,
                     stamps=LIVE)
        self.events += new
        return new


@asynccontextmanager
async def brain_producer(settings: ArchiverSettings) -> AsyncIterator[AIOKafkaProducer]:
    """A transactional producer, like the brain's PartitionWriter."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings),
                                acks="all", enable_idempotence=True,
                                transactional_id=f"test-archiver-{uuid.uuid4().hex}", linger_ms=1)
    await producer.start()
    try:
        yield producer
    finally:
        await producer.stop()


async def produce(producer: AIOKafkaProducer, settings: ArchiverSettings, topic: str,
                  events: Sequence[Event], commit: bool = True,
                  headers: Sequence[tuple[str, bytes]] = ()) -> dict[int, int]:
    """The events in one Kafka transaction, committed (or aborted), each with `headers`;
    partition -> next offset after them."""
    await producer.begin_transaction()
    sent = [await send_keyed(producer, topic, event.session_id, event, settings.partitions, headers)
            for event in events]
    if commit:
        await producer.commit_transaction()
    else:
        await producer.abort_transaction()
    after: dict[int, int] = {}
    for meta in sent:
        after[meta.partition] = max(after.get(meta.partition, 0), meta.offset + 1)
    return after


# -- reading the archive -----------------------------------------------------------------

async def stored_events(pool: TenantPool, session: Session) -> list[Event]:
    async with pool.transaction(session.tenant) as conn:
        return await session_events(conn, session.session_id)


async def session_row(pool: TenantPool, session: Session) -> dict[str, Any] | None:
    async with pool.transaction(session.tenant) as conn:
        row = await conn.fetchrow("SELECT * FROM sessions WHERE session_id = $1", session.session_id)
    return dict(row) if row else None


async def archived_offsets(pool: TenantPool, group: str, topic: str) -> dict[int, int]:
    async with pool.system_transaction() as conn:
        rows = await conn.fetch("SELECT partition, next_offset FROM archiver_offsets "
                                "WHERE consumer_group = $1 AND topic = $2", group, topic)
    return {r["partition"]: r["next_offset"] for r in rows}


async def eventually(probe: Callable[[], Awaitable[T]], what: str, timeout: float = 30.0,
                     every: float = 0.1, failed: Callable[[], Any] | None = None) -> T:
    """Polls `probe` until it returns something truthy; fails naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if failed is not None and failed():
            raise AssertionError(f"gave up waiting for {what}: {failed()!r}")
        if time.monotonic() > deadline:
            settings = CommonSettings()
            held = await held_partitions(settings.kafka_bootstrap, settings.partitions)
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last saw {value!r}; {held}")
        await asyncio.sleep(every)



# -- what was set aside ------------------------------------------------------------------

async def parked_row(pool: TenantPool, session: Session) -> dict[str, Any] | None:
    """The session's row in archiver_quarantine (0010), if the archiver parked it."""
    async with pool.system_transaction() as conn:
        row = await conn.fetchrow("SELECT * FROM archiver_quarantine WHERE tenant = $1 AND session_id = $2",
                                  session.tenant, session.session_id)
    return dict(row) if row else None


async def dead_letters_for(pool: TenantPool, dead_letter_topic: str, session_id: str) -> list[dict[str, Any]]:
    """Letters archived from `dead_letter_topic` about records keyed by `session_id`, in source order."""
    async with pool.system_transaction() as conn:
        rows = await conn.fetch('SELECT topic, partition, "offset", reason, service, value FROM dead_letters '
                                'WHERE dl_topic = $1 AND key = $2 ORDER BY "offset"', dead_letter_topic, session_id)
    return [dict(r) for r in rows]


async def archived_all(pool: TenantPool, sessions: Sequence[Session]) -> bool:
    """Every session's archive equals its whole log, in order."""
    for session in sessions:
        if await stored_events(pool, session) != session.events:
            return False
    return True
