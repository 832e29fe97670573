"""The suite keeps to itself (issue 13): `make test` runs it, and every service it starts,
under names of its own, so a session the suite runs lands in its topics and its database
and never in the demo's, and its services never join a demo group.

The demo's names are the defaults: topics `wakeline.*`, groups `wakeline-*`, the database
the DSNs name (`wakeline`). Run the suite without `make test`'s WAKELINE_TOPIC_PREFIX and
WAKELINE_POSTGRES_DATABASE and these tests fail.
"""

from __future__ import annotations

import asyncio
import re

import asyncpg
from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.e2e.sessions import create_session, wait_ended
from tests.e2e.stored_log import assert_log_whole
from wakeline.transport.kafka_io import kafka_auth
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import ALL_TOPICS, DEFAULT_PREFIX, PREFIX, names, partition_for, record_key
from wakeline_archiver.settings import ArchiverSettings
from wakeline_brain.settings import BrainSettings
from wakeline_runner.settings import RunnerSettings

DEMO = names(DEFAULT_PREFIX)


def demo_settings() -> CommonSettings:
    """This stack's address, with the demo's database (the one the DSNs name themselves)."""
    return CommonSettings(postgres_database=None)


def test_the_suite_runs_under_a_topic_prefix_groups_and_database_that_are_not_the_demos():
    assert PREFIX != DEFAULT_PREFIX, "WAKELINE_TOPIC_PREFIX is the demo's: run the suite with `make test`"
    assert not set(ALL_TOPICS) & set(DEMO.all_topics)
    groups = {BrainSettings().group_id, RunnerSettings().group_id, ArchiverSettings().archiver_group}
    assert not [g for g in groups for service in ("brain", "runner", "archiver") if g.startswith(DEMO.group(service))]
    assert CommonSettings().database != demo_settings().database, \
        "the suite's database is the demo's: run the suite with `make test` (WAKELINE_POSTGRES_DATABASE)"


def test_a_session_the_suite_runs_reaches_its_own_topics_and_database_and_none_of_the_demos(stack, client):
    before = asyncio.run(demo_topic_ends())
    sid = create_session(client, "tools3")
    assert wait_ended(client, stack, sid)["ended_reason"] == "completed"
    assert assert_log_whole(sid)  # stored in the suite's database
    partition = partition_for(sid, CommonSettings().partitions)
    grown = {tp: before.get(tp, 0) for tp, end in asyncio.run(demo_topic_ends()).items()
             if tp.partition == partition and end > before.get(tp, 0)}
    written = asyncio.run(demo_keys_since(grown)) if grown else set()
    assert record_key(sid) not in written, f"the suite's session {sid} reached the demo's topics"
    assert asyncio.run(demo_database_tenant(sid)) is None, f"the suite's session {sid} is in the demo's database"
    joined = set(re.findall(r"partitions .* for group (\S+)", stack.services["brain"].log.read_text(errors="replace")))
    assert joined == {BrainSettings().group_id}, joined


async def demo_topic_ends() -> dict[TopicPartition, int]:
    """The end of every partition of the demo's topics that exist on this broker."""
    consumer = demo_reader()
    await consumer.start()
    try:
        present = set(DEMO.all_topics) & await consumer.topics()
        tps = [TopicPartition(t, p) for t in present for p in range(demo_settings().partitions)]
        return await consumer.end_offsets(tps) if tps else {}
    finally:
        await consumer.stop()


async def demo_keys_since(starts: dict[TopicPartition, int]) -> set[bytes]:
    """The keys of every record written to these partitions since `starts` (aborted ones too)."""
    consumer = demo_reader()
    await consumer.start()
    keys: set[bytes] = set()
    try:
        ends = await consumer.end_offsets(list(starts))
        consumer.assign(list(starts))
        for tp, start in starts.items():
            consumer.seek(tp, start)
        while True:
            batches = await consumer.getmany(timeout_ms=2_000)
            keys |= {record.key for records in batches.values() for record in records if record.key}
            # an empty batch: only transaction markers, which no batch returns, were left
            if not batches or all([await consumer.position(tp) >= ends[tp] for tp in starts]):
                return keys
    finally:
        await consumer.stop()


def demo_reader() -> AIOKafkaConsumer:
    settings = demo_settings()
    return AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), group_id=None,
                            enable_auto_commit=False, isolation_level="read_uncommitted")


async def demo_database_tenant(session_id: str) -> str | None:
    """Who owns `session_id` in the demo's database; None when it holds no such session (or no database)."""
    try:
        conn = await asyncpg.connect(demo_settings().postgres_dsn, timeout=10)
    except asyncpg.InvalidCatalogNameError:
        return None
    try:
        return await conn.fetchval("SELECT session_tenant($1)", session_id)
    finally:
        await conn.close()
