"""Archiver throughput (Kafka → Postgres, events/s) against a raw asyncpg COPY of the same
kind of rows into the same table, measured side by side in one run.

The archiver runs as its own process under a fresh consumer group whose stored offsets are
set to the topic's current end, so it archives exactly the events produced here. Its rate
is taken from the first stored row to the last (its start-up is reported apart).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from bench.harness import ROOT, produce_events, service, superuser
from bench.synthetic import session_events
from wakeline.event_store import EVENT_COLUMNS, event_row
from wakeline.settings import CommonSettings
from wakeline.topics import EVENTS


async def _seed_offsets(settings: CommonSettings, group: str) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(EVENTS, p) for p in range(settings.partitions)]
        ends = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    conn = await service()
    try:
        await conn.executemany(
            "INSERT INTO archiver_offsets (consumer_group, topic, partition, next_offset, updated_at)"
            " VALUES ($1, $2, $3, $4, now())", [(group, EVENTS, tp.partition, end) for tp, end in ends.items()])
    finally:
        await conn.close()


async def _count(session_ids: list[str]) -> int:
    conn = await superuser()
    try:
        return await conn.fetchval("SELECT count(*) FROM event_keys WHERE session_id = ANY($1)", session_ids)
    finally:
        await conn.close()


async def archiver_rate(sessions: int, per_session: int) -> dict:
    settings = CommonSettings()
    group = f"bench-archiver-{uuid.uuid4().hex[:8]}"
    batch = [session_events(per_session) for _ in range(sessions)]
    events = [e for s in batch for e in s]
    ids = [s[0].session_id for s in batch]
    await _seed_offsets(settings, group)
    await produce_events(settings, events)
    env = {**os.environ, "WAKELINE_ARCHIVER_GROUP": group,
           "WAKELINE_ARCHIVER_DATA_DIR": tempfile.mkdtemp(prefix="bench-archiver-")}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "wakeline_archiver"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = None
    try:
        while True:
            stored = await _count(ids)
            now = time.perf_counter()
            if stored and first is None:
                first = (now, stored)
            if stored >= len(events):
                break
            if proc.poll() is not None or now - started > 300:
                raise RuntimeError(f"archiver stopped or stalled at {stored}/{len(events)}")
            await asyncio.sleep(0.02)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    done = time.perf_counter()
    rate = (len(events) - first[1]) / (done - first[0]) if done > first[0] else float("nan")
    return {"events": len(events), "startup_s": round(first[0] - started, 2),
            "events_per_s": round(rate, 1)}


async def copy_rate(sessions: int, per_session: int) -> dict:
    events = [e for _ in range(sessions) for e in session_events(per_session)]
    rows = [event_row(e) for e in events]
    conn = await superuser()
    try:
        # the key-registry trigger runs as the table owner, whom FORCE RLS still binds
        await conn.execute("SELECT set_config('wakeline.tenant', 'default', false)")
        started = time.perf_counter()
        await conn.copy_records_to_table("events", records=rows, columns=list(EVENT_COLUMNS))
        elapsed = time.perf_counter() - started
    finally:
        await conn.close()
    return {"events": len(events), "events_per_s": round(len(events) / elapsed, 1)}


async def run(sessions: int = 100, per_session: int = 200) -> dict:
    archiver = await archiver_rate(sessions, per_session)
    raw = await copy_rate(sessions, per_session)
    return {"bench": "archiver_throughput", "archiver": archiver, "copy": raw,
            "ratio_archiver_to_copy": round(archiver["events_per_s"] / raw["events_per_s"], 3)}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run())))
