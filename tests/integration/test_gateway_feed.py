"""The gateway's events feed: commands and live streams answered from `wakeline.events`.

Events here are committed to the real broker the way the brain commits them (a
transactional producer) and, where a test says so, stored in Postgres as the archiver
would, later or never: what the gateway answers from must then be the feed. The
listeners' own rules (tenant isolation, removal, a slow stream cut off) are checked
without Kafka at the end.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import ConsumerRecord

from gateway_harness import FakeInbox, Seeder, created, draft, gateway_settings, running_gateway, sealed
from wakeline.contract.codec import encode
from wakeline.contract.events import Event
from wakeline.transport.kafka_io import kafka_auth
from wakeline.storage.pg import TenantPool
from wakeline.contract.topics import EVENTS, partition_for, record_key
from wakeline_gateway.deps import get_inbox
from wakeline_gateway.feed import EventsFeed
from wakeline_gateway.listeners import Listeners

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


@pytest.fixture(scope="module")
async def fed():
    """Postgres is rechecked so rarely that only the feed can answer within a test."""
    settings = gateway_settings(wait_timeout_s=5.0, outcome_recheck_s=60.0, stream_recheck_s=60.0,
                                stream_poll_s=0.05)
    inbox = FakeInbox()
    async with running_gateway(settings) as (app, client):
        app.dependency_overrides[get_inbox] = lambda: inbox
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings),
                                    acks="all", enable_idempotence=True,
                                    transactional_id=f"wakeline-test-feed-{uuid.uuid4()}")
        await producer.start()
        try:
            async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
                yield app, client, Seeder(pool, settings.tenant), inbox, Commit(producer, settings.partitions)
        finally:
            await producer.stop()


class Commit:
    """Commits events to `wakeline.events` in one transaction, as the brain does."""

    def __init__(self, producer: AIOKafkaProducer, partitions: int):
        self._producer, self._partitions = producer, partitions

    async def __call__(self, events: list[Event]) -> None:
        async with self._producer.transaction():
            for event in events:
                await self._producer.send(EVENTS, encode(event), key=record_key(event.session_id),
                                          partition=partition_for(event.session_id, self._partitions))


async def until(predicate, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def frames(text: str) -> list[dict[str, str]]:
    blocks = (dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
              for block in text.split("\n\n"))
    return [fields for fields in blocks if fields]


async def test_a_command_is_answered_from_the_feed_before_postgres_has_its_outcome(fed) -> None:
    _, client, seeder, inbox, commit = fed
    history = await seeder.session([created()])
    sid = history[0].session_id

    async def brain() -> list[Event]:
        command = await inbox.next_unanswered(sid)
        answer = sealed([draft("user_message", command.command_id, text="go")], sid, seeder.tenant, history[-1])
        await commit(answer)  # never archived: only the feed can tell the gateway
        return answer

    response, answer = await asyncio.gather(client.post(f"/v1/sessions/{sid}/messages", json={"text": "go"}), brain())
    body = response.json()
    assert (response.status_code, body["status"], body["outcome"], body["seq"]) == (202, "done", "user_message", 2)
    assert body["command_id"] == answer[0].causation_id


async def test_a_stream_switches_from_history_to_the_feed_without_a_gap_or_a_duplicate(fed) -> None:
    app, client, seeder, _, commit = fed
    listeners: Listeners = app.state.feed.listeners
    log = sealed([created(), draft("user_message", "c1", text="hi"), draft("turn_started", turn=1),
                  draft("model_turn", text="thinking"), draft("turn_ended", turn=1),
                  draft("session_ended", reason="completed")], str(uuid.uuid4()), seeder.tenant)
    sid = log[0].session_id
    await seeder.insert(log[:2], log[:2])
    # seq 3 is committed and the feed has passed it before the stream subscribes, and the
    # archiver has not stored it yet: only Postgres, later, can fill that gap.
    with listeners.subscription(seeder.tenant, sid) as probe:
        await commit(log[2:3])
        await asyncio.wait_for(probe.queue.get(), 10)
        reading = asyncio.create_task(client.get(f"/v1/sessions/{sid}/stream", params={"until_end": "true"}))
        await until(lambda: listeners.counts()[1] == 2)
    await commit(log[3:])  # 4..6 reach the stream from the feed, 3 still missing there
    await asyncio.sleep(0.3)
    assert not reading.done()
    await seeder.insert(log, log[2:])  # the archiver catches up: 3 fills the gap, 4..6 are duplicates
    answer = await asyncio.wait_for(reading, timeout=10)
    assert [int(f["id"]) for f in frames(answer.text)] == [1, 2, 3, 4, 5, 6]
    assert listeners.counts() == (0, 0)


async def test_a_live_stream_gets_committed_events_that_postgres_never_stores(fed) -> None:
    app, client, seeder, _, commit = fed
    listeners: Listeners = app.state.feed.listeners
    history = await seeder.session([created()])
    sid = history[0].session_id
    reading = asyncio.create_task(client.get(f"/v1/sessions/{sid}/stream", params={"until_end": "true"}))
    await until(lambda: listeners.counts()[1] == 1)
    await commit(sealed([draft("user_message", "c1", text="hi"), draft("session_ended", reason="completed")],
                        sid, seeder.tenant, history[-1]))
    answer = await asyncio.wait_for(reading, timeout=10)
    assert [(f["id"], f["event"]) for f in frames(answer.text)] == [
        ("1", "session_created"), ("2", "user_message"), ("3", "session_ended")]


def events_of(tenant: str, session_id: str, count: int) -> list[Event]:
    drafts = [created()] + [draft("user_message", f"c{n}", text=f"m{n}") for n in range(1, count)]
    return sealed(drafts, session_id, tenant)


async def test_listeners_see_only_their_own_tenants_events_of_their_session() -> None:
    listeners = Listeners()
    sid = str(uuid.uuid4())
    mine, foreign = events_of("t-mine", sid, 2), events_of("t-other", sid, 2)
    with listeners.subscription("t-mine", sid) as live, listeners.outcome("t-mine", sid, "c1") as heard:
        for event in foreign + events_of("t-mine", str(uuid.uuid4()), 2):
            listeners.deliver(event)
        assert live.queue.empty() and not heard.done()
        for event in mine:
            listeners.deliver(event)
        assert heard.result() == mine[1] and [live.queue.get_nowait() for _ in range(2)] == mine


async def test_listeners_that_go_away_are_removed() -> None:
    listeners = Listeners()
    with listeners.subscription("t", "s"), listeners.outcome("t", "s", "c"), listeners.outcome("t", "s", "c"):
        assert listeners.counts() == (2, 1)
    assert listeners.counts() == (0, 0)


async def test_a_slow_stream_is_cut_off_without_holding_up_the_feed() -> None:
    listeners = Listeners(queue_size=2)
    sid = str(uuid.uuid4())
    events = events_of("t", sid, 4)
    with listeners.subscription("t", sid) as slow, listeners.subscription("t", sid) as other:
        for event in events[:2]:
            listeners.deliver(event)
        other.queue.get_nowait(), other.queue.get_nowait()
        for event in events[2:]:
            listeners.deliver(event)  # never waits for the slow one
        assert slow.cut_off and slow.queue.qsize() == 2 and listeners.counts() == (0, 1)
        assert not other.cut_off and [other.queue.get_nowait() for _ in range(2)] == events[2:]


async def test_listeners_watch_a_session_only_while_someone_here_listens_to_it() -> None:
    listeners = Listeners()
    assert not listeners.watches("s")
    with listeners.outcome("t", "s", "c"):
        assert listeners.watches("s") and not listeners.watches_deltas("s") and not listeners.watches("other")
        with listeners.subscription("t2", "s", deltas=True):  # another tenant's stream of the same id
            assert listeners.watches("s") and listeners.watches_deltas("s")
        assert listeners.watches("s") and not listeners.watches_deltas("s")
    assert not listeners.watches("s") and listeners.counts() == (0, 0)


class Batches:
    """A consumer stand-in for the feed's loop (no broker: what is checked is which records
    the feed decodes): hands out one batch, then waits like an idle long poll."""

    def __init__(self, records: list[ConsumerRecord]):
        self._records: list[ConsumerRecord] | None = records

    async def getmany(self, timeout_ms: int) -> dict[object, list[ConsumerRecord]]:
        if self._records is None:
            await asyncio.sleep(timeout_ms / 1000)
            return {}
        records, self._records = self._records, None
        return {"tp": records}


def record(offset: int, key: bytes | None, value: bytes) -> ConsumerRecord:
    return ConsumerRecord(EVENTS, 0, offset, 0, 0, key, value, None, len(key or b""), len(value), [])


async def test_the_feed_decodes_only_records_of_sessions_someone_here_listens_to(caplog) -> None:
    listeners = Listeners()
    watched, unwatched = str(uuid.uuid4()), str(uuid.uuid4())
    first, second = events_of("t", watched, 2)
    feed = EventsFeed(Batches([
        record(0, record_key(unwatched), b"{not an event"),  # never decoded: no warning
        record(1, record_key(watched), b"{not an event either"),  # decoded, refused, said
        record(2, record_key(unwatched), encode(events_of("t", unwatched, 1)[0])),
        record(3, record_key(watched), encode(first)),
        record(4, None, encode(second)),  # no key: decoded, judged by what it names
    ]), 1, listeners)
    with listeners.subscription("t", watched) as live, caplog.at_level("WARNING"):
        task = asyncio.create_task(feed._run())
        try:
            got = [await asyncio.wait_for(live.queue.get(), 5) for _ in range(2)]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert got == [first, second] and live.queue.empty()
    refused = [r.getMessage() for r in caplog.records if "is not an event" in r.getMessage()]
    assert len(refused) == 1 and "@1 " in refused[0]
