"""Archiver throughput (Kafka → Postgres, events/s) against a raw asyncpg COPY of the same
kind of rows into the same table, measured side by side in one run. A second floor is the
same rows inserted as the archiver's role over its DSN, one `INSERT … SELECT FROM unnest(…)`
per 500 rows: what a set-based writer with RLS and TCP costs, without decoding or look-ups.

The archiver runs as its own process under a fresh consumer group whose stored offsets are
set to the topic's current end, so it archives exactly the events produced here. Its rate
is taken from the first stored rows to the last (its start-up and first batch are left out,
so the run must hold several batches: `WAKELINE_ARCHIVER_BATCH_SIZE`, 5000 by default).

Lag under load: a producer writes at a steady rate (a fraction of the rate just
measured, in one Kafka transaction per tick, like the brain) while the archiver runs;
the archiver's lag (`wakeline_archiver.lag`: committed events between the partition's
end and the archive's stored offset, summed over partitions) is sampled throughout. In
seconds it is that many events at the producing rate.
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

import asyncpg
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from aiokafka import AIOKafkaProducer

from bench.harness import ROOT, percentile, produce_events, service, superuser
from bench.synthetic import session_events
from wakeline.contract.codec import encode
from wakeline.storage.event_rows import EVENT_COLUMNS, event_row
from wakeline.storage.event_statements import INSERT_ROWS
from wakeline.transport.kafka_io import kafka_auth
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import ARCHIVER_GROUP, EVENTS, partition_for, record_key
from wakeline_archiver.lag import LagProbe

TICK_S = 0.1


async def _seed_offsets(settings: CommonSettings, group: str) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings))
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


async def _count(conn: asyncpg.Connection, session_ids: list[str]) -> int:
    return await conn.fetchval("SELECT count(*) FROM event_keys WHERE session_id = ANY($1)", session_ids)


async def _stored_offsets(conn: asyncpg.Connection, group: str) -> int:
    """How far the archiver's stored offsets reach, summed over partitions: it stores them in
    the transaction that stores the rows, so this moves exactly when rows do."""
    return await conn.fetchval("SELECT coalesce(sum(next_offset), 0) FROM archiver_offsets "
                               "WHERE consumer_group = $1 AND topic = $2", group, EVENTS)


async def _stored_offsets_now(group: str) -> int:
    conn = await superuser()
    try:
        return await _stored_offsets(conn, group)
    finally:
        await conn.close()


def _start_archiver(group: str) -> subprocess.Popen:
    env = {**os.environ, "WAKELINE_ARCHIVER_GROUP": group,
           "WAKELINE_ARCHIVER_DATA_DIR": tempfile.mkdtemp(prefix="bench-archiver-")}
    return subprocess.Popen([sys.executable, "-m", "wakeline_archiver"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def archiver_rate(sessions: int, per_session: int) -> dict:
    settings = CommonSettings()
    group = f"{ARCHIVER_GROUP}-bench-{uuid.uuid4().hex[:8]}"
    batch = [session_events(per_session) for _ in range(sessions)]
    events = [e for s in batch for e in s]
    ids = [s[0].session_id for s in batch]
    await _seed_offsets(settings, group)
    seeded = await _stored_offsets_now(group)
    await produce_events(settings, events)
    # One connection, opened before the archiver starts, polling six offset rows; the rows
    # themselves are counted only when those move (once per stored batch). The floors
    # below are timed with nothing watching them, so the watching here must cost Postgres
    # next to nothing: it was a fresh superuser connection (and a `pg.sh status`) counting
    # every row each 20 ms.
    conn = await superuser()
    started = time.perf_counter()
    proc = _start_archiver(group)
    first, seen, stored = None, seeded, 0
    try:
        while stored < len(events):
            reached = await _stored_offsets(conn, group)
            now = time.perf_counter()
            if reached != seen:  # a batch was stored, in the transaction that moved the offsets
                seen, stored = reached, await _count(conn, ids)
                if first is None:
                    first = (now, stored)
            if proc.poll() is not None or now - started > 300:
                raise RuntimeError(f"archiver stopped or stalled at {stored}/{len(events)}")
            await asyncio.sleep(0.01)
        done = time.perf_counter()
    finally:
        await conn.close()
        proc.terminate()
        proc.wait(timeout=30)
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


async def insert_rate(sessions: int, per_session: int) -> dict:
    """A second floor: the same rows as the archiver's role over its DSN (RLS, TCP), one
    `INSERT … SELECT FROM unnest(…)` per 500 rows, each in its own transaction, no look-ups."""
    settings = CommonSettings()
    events = [e for _ in range(sessions) for e in session_events(per_session)]
    rows = [event_row(e) for e in events]
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=1) as pool:
        async with pool.transaction("default") as conn:
            await conn.execute("SELECT ensure_events_partition($1)", events[0].ts)
        started = time.perf_counter()
        for first in range(0, len(rows), 500):
            async with pool.transaction("default") as conn:
                await conn.execute(INSERT_ROWS, *zip(*rows[first:first + 500]))
        elapsed = time.perf_counter() - started
    return {"events": len(events), "events_per_s": round(len(events) / elapsed, 1)}


async def lag_under_load(rate: float, seconds: float, sessions: int = 200) -> dict:
    """The archiver's lag while `rate` events/s arrive for `seconds`, round-robin over `sessions`."""
    settings = CommonSettings()
    group = f"{ARCHIVER_GROUP}-bench-lag-{uuid.uuid4().hex[:8]}"
    per_tick = max(1, round(rate * TICK_S))
    per_session = -(-per_tick * round(seconds / TICK_S) // sessions)
    chains = [session_events(per_session) for _ in range(sessions)]
    # Round-robin, each session in seq order: what many concurrent sessions look like.
    events = [chain[i] for i in range(per_session) for chain in chains]
    await _seed_offsets(settings, group)
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings),
                                acks="all", enable_idempotence=True,
                                linger_ms=5, transactional_id=f"wakeline-bench-{uuid.uuid4()}")
    proc = _start_archiver(group)
    samples: list[int] = []
    try:
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=1) as pool, \
                LagProbe(settings) as probe:
            await producer.start()
            await _wait_started(probe, pool, group, proc, producer, settings)
            loop = asyncio.get_running_loop()
            sampler = asyncio.create_task(_sample_lag(probe, pool, group, samples))
            started = loop.time()
            for tick, first in enumerate(range(0, len(events), per_tick)):
                async with producer.transaction():
                    for ev in events[first:first + per_tick]:
                        await producer.send(EVENTS, encode(ev), key=record_key(ev.session_id),
                                            partition=partition_for(ev.session_id, settings.partitions))
                await asyncio.sleep(max(0.0, started + (tick + 1) * TICK_S - loop.time()))
            produced_s = loop.time() - started
            sampler.cancel()
            await asyncio.gather(sampler, return_exceptions=True)
    finally:
        await producer.stop()
        proc.terminate()
        proc.wait(timeout=30)
    achieved = len(events) / produced_s
    return {"events": len(events), "target_events_per_s": round(rate), "produced_events_per_s": round(achieved),
            "samples": len(samples), "lag_events_p50": percentile([float(s) for s in samples], 50),
            "lag_events_p99": percentile([float(s) for s in samples], 99),
            "lag_s_p50": round(percentile([float(s) for s in samples], 50) / achieved, 3),
            "lag_s_p99": round(percentile([float(s) for s in samples], 99) / achieved, 3)}


async def _wait_started(probe: LagProbe, pool: TenantPool, group: str, proc: subprocess.Popen,
                        warm_up: AIOKafkaProducer, settings: CommonSettings) -> None:
    """Until the archiver has stored a first warm-up session: its start-up is not lag under load."""
    seeded = sum(p["archived_offset"] for p in (await probe.measure(pool, group)).values())
    async with warm_up.transaction():
        for ev in session_events(5):
            await warm_up.send(EVENTS, encode(ev), key=record_key(ev.session_id),
                               partition=partition_for(ev.session_id, settings.partitions))
    deadline = time.perf_counter() + 60
    while time.perf_counter() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the archiver exited during start-up")
        lag = await probe.measure(pool, group)
        if sum(p["archived_offset"] for p in lag.values()) > seeded and not sum(p["lag"] for p in lag.values()):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("the archiver did not start within 60 s")


async def _sample_lag(probe: LagProbe, pool: TenantPool, group: str, samples: list[int]) -> None:
    while True:
        lag = await probe.measure(pool, group)
        samples.append(sum(p["lag"] for p in lag.values()))
        await asyncio.sleep(0.2)


def _median_of(figures: list[dict]) -> dict:
    """The round whose rate is the median, with every round's rate beside it."""
    ordered = sorted(figures, key=lambda f: f["events_per_s"])
    return {**ordered[len(ordered) // 2], "rounds_events_per_s": [f["events_per_s"] for f in figures]}


async def run(sessions: int = 100, per_session: int = 200, load_fraction: float = 0.8,
              load_s: float = 10.0, rounds: int = 3) -> dict:
    """Archiver, COPY and the `unnest` insert take turns, `rounds` times, and each figure is
    the median of its rounds: one COPY is a few seconds, and a slow moment of a shared
    machine moved a single one by 2x (docs/history/benchmarks.md, eleventh session). 20,000 events
    a round (four of the archiver's 5,000-record batches, the first left out), so three
    rounds cost `make bench` what one round of 40,000 did plus half."""
    archiver, raw, insert = [], [], []
    for _ in range(rounds):
        archiver.append(await archiver_rate(sessions, per_session))
        raw.append(await copy_rate(sessions, per_session))
        insert.append(await insert_rate(sessions, per_session))
    per_round = [round(a["events_per_s"] / c["events_per_s"], 3) for a, c in zip(archiver, raw)]
    archiver_m, raw_m, insert_m = _median_of(archiver), _median_of(raw), _median_of(insert)
    lag = await lag_under_load(archiver_m["events_per_s"] * load_fraction, load_s)
    return {"bench": "archiver_throughput", "rounds": rounds, "archiver": archiver_m, "copy": raw_m,
            "unnest_insert": insert_m,
            "ratio_archiver_to_copy": round(archiver_m["events_per_s"] / raw_m["events_per_s"], 3),
            "ratio_archiver_to_copy_per_round": per_round,
            "ratio_archiver_to_unnest_insert": round(archiver_m["events_per_s"] / insert_m["events_per_s"], 3),
            "lag_under_load": {"load_fraction": load_fraction, **lag}}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run())))
