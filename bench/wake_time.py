"""Wake time: load a session the brain does not hold (archive + Kafka tail) and fold it.

This is `SessionLoader.load` + `snapshots.resume`, the code an actor runs on wake, for
sessions of 1k, 10k and 100k events shaped as the brain writes them: rounds of user
message, model turn, tool call and tool result (each input with its id), a compaction
every `compact_every` events, and a snapshot every `snapshot_every` events where the
brain would write one (not one over `max_record_bytes`: the brain leaves those out, and a
wake then starts from an older snapshot or the first event). Rows go straight into Postgres, and a
private archiver group's position is set to the partition's end, so the session is fully
archived and the Kafka tail is empty, as for a session idle long enough to be evicted.

Side by side in one run, alternated size by size: the wake; the wake as it was before
snapshots (every row read and folded); and the floor, a bare indexed read of the rows the
wake reads. Medians with p99; `ratio_to_1k` is the target's figure (≤ 2).
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

from aiokafka.structs import TopicPartition

from bench.harness import service, summary
from wakeline.contract import events as e
from wakeline.log.chain import Draft, seal
from wakeline.contract.codec import encode
from wakeline.storage.event_statements import SELECT_NEWEST_SNAPSHOT, SELECT_SESSION_FROM, insert_events, session_events
from wakeline.contract.events import Event
from wakeline.log.fold import fold
from wakeline.storage.pg import TenantPool
from wakeline.storage.postgres_store import PostgresEventStore
from wakeline.runtime.settings import CommonSettings
from wakeline.log.snapshots import resume, snapshot_payload
from wakeline.log.state import SessionState
from wakeline.contract.topics import EVENTS, partition_for
from wakeline_brain.tail_reads import TailReader, tail_consumer
from wakeline_brain.wake import SessionLoader

TENANT = "default"
GENESIS = "0" * 64


def _draft(seq: int, state: SessionState, compact_every: int) -> Draft:
    if seq == 1:
        config = e.SessionConfig(model="scripted:noop", max_turns=10_000)
        return Draft(payload=e.SessionCreatedPayload(config=config, owner="user:bench"), actor="user:bench",
                     trust="instruction", causation_id=str(uuid.uuid4()))
    if seq % compact_every == 0 and len(state.messages) > 20:  # as context.plan_compaction keeps the recent
        payload = e.CompactionPayload(summary="earlier: listed files, step by step", covered_from_seq=1,
                                      covered_to_seq=state.messages[-20].seq - 1, tokens_before=9000,
                                      tokens_after=900)
        return Draft(payload=payload, actor="system:brain", trust="instruction")
    call = f"toolu_{seq // 4}"
    match seq % 4:
        case 2:
            return Draft(payload=e.UserMessagePayload(text=f"step {seq}: do the next thing"), actor="user:bench",
                         trust="instruction", causation_id=str(uuid.uuid4()))
        case 3:
            return Draft(payload=e.ModelTurnPayload(text="Looking at the files." * 4), actor="agent:scripted:noop",
                         trust="instruction")
        case 0:
            return Draft(payload=e.ToolCallPayload(tool_call_id=call, name="list_files", input={"path": "."}),
                         actor="agent:scripted:noop", trust="instruction")
    return Draft(payload=e.ToolResultPayload(tool_call_id=call, name="list_files", output="a.txt\nb.txt\n" * 5),
                 actor="runner:bench", trust="data", causation_id=f"result:{call}")


def brain_log(n: int, snapshot_every: int = 1000, compact_every: int = 1000,
              max_record_bytes: int = 1_000_000) -> list[Event]:
    """n events as the brain writes them, snapshots included: one once `snapshot_every`
    events came since the last, left out when its record is over `max_record_bytes` (the
    count then starts again), as the brain's `SessionLog.write` and `_snapshot` do. A wake
    reads the newest one that was written, however old."""
    sid, start = str(uuid.uuid4()), datetime.now(timezone.utc)
    out: list[Event] = []
    state, folded = SessionState(), 0  # the fold of out[:folded], caught up only where a draft needs it
    snapshot_seq = 0

    def sealed(draft: Draft) -> Event:
        seq = len(out) + 1
        return seal(draft, session_id=sid, tenant=TENANT, seq=seq, prev_hash=out[-1].hash if out else GENESIS,
                    ts=start + timedelta(microseconds=seq), event_id=str(uuid.uuid4()))

    while len(out) < n:
        seq = len(out) + 1
        if seq - 1 - snapshot_seq >= snapshot_every:
            state, folded = fold(out[folded:], state), len(out)
            snapshot = sealed(Draft(payload=snapshot_payload(state), actor="system:brain", trust="instruction"))
            if len(encode(snapshot)) <= max_record_bytes:
                out.append(snapshot)
                snapshot_seq = seq
                continue
            snapshot_seq = seq - 1  # too large: not written, and not tried again for snapshot_every events
        if seq % compact_every == 0:
            state, folded = fold(out[folded:], state), len(out)
        out.append(sealed(_draft(seq, state, compact_every)))
    return out


async def _store(settings: CommonSettings, events: list[Event], group: str, end: int) -> None:
    conn = await service()
    try:
        async with conn.transaction():
            await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", TENANT)
            await conn.execute("SELECT ensure_events_partition($1)", events[0].ts)
            for at in range(0, len(events), 5000):
                await insert_events(conn, events[at:at + 5000])
            partition = partition_for(events[0].session_id, settings.partitions)
            await conn.execute("INSERT INTO archiver_offsets (consumer_group, topic, partition, next_offset) "
                               "VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING", group, EVENTS, partition, end)
    finally:
        await conn.close()


async def _timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    result = await fn()
    return (time.perf_counter() - started) * 1000, result


class Seeded(NamedTuple):
    session_id: str
    last_seq: int
    snapshot_seq: int | None
    snapshot_bytes: int | None
    state_bytes: int  # a snapshot of the whole log's state, as one taken at its end would be


async def _seed(settings: CommonSettings, tail, group: str, n: int, snapshot_every: int) -> Seeded:
    log = brain_log(n, snapshot_every, max_record_bytes=settings.max_record_bytes)
    tp = TopicPartition(EVENTS, partition_for(log[0].session_id, settings.partitions))
    await _store(settings, log, group, (await tail.end_offsets([tp]))[tp])
    snaps = [ev for ev in log if isinstance(ev, e.SnapshotTaken)]
    at_end = len(encode(snapshot_payload(fold(log))))
    return Seeded(log[0].session_id, log[-1].seq, snaps[-1].seq if snaps else None,
                  len(encode(snaps[-1])) if snaps else None, at_end)


async def run(sizes: tuple[int, ...] = (1_000, 10_000, 100_000), repeats: int = 5,
              snapshot_every: int = 1000) -> list[dict]:
    settings = CommonSettings()
    group = f"bench-wake-{uuid.uuid4().hex[:8]}"
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
        tail = tail_consumer(settings)
        loader = SessionLoader(PostgresEventStore(pool), TailReader(tail), group)
        await tail.start()
        try:
            # Seeded one at a time and dropped: the made-up logs are not the brain's heap,
            # and the collector's passes over 100k held events would be timed as the wake's.
            seeded = {n: await _seed(settings, tail, group, n, snapshot_every) for n in sizes}
            gc.collect()
            times: dict[int, dict[str, list[float]]] = {n: {"wake": [], "resume": [], "full": [], "floor": []}
                                                        for n in sizes}
            for _ in range(repeats):  # alternated: every size and path once per round
                for n, (sid, want, *_) in seeded.items():
                    part = partition_for(sid, settings.partitions)
                    t = times[n]
                    ms, loaded = await _timed(lambda: loader.load(sid, TENANT, part))
                    started = time.perf_counter()
                    assert resume(loaded).last_seq == want  # type: ignore[arg-type]
                    t["resume"].append((time.perf_counter() - started) * 1000)
                    t["wake"].append(ms + t["resume"][-1])
                    del loaded
                    t["full"].append(await _full(pool, sid, want))
                    t["floor"].append(await _floor(pool, sid))
        finally:
            await tail.stop()
    return _lines(seeded, times, settings.max_record_bytes)


async def _full(pool: TenantPool, sid: str, want: int) -> float:
    """The wake before snapshots: every row read and folded from the first event."""
    started = time.perf_counter()
    async with pool.transaction(TENANT) as conn:
        events = await session_events(conn, sid)
    assert fold(events).last_seq == want
    return (time.perf_counter() - started) * 1000


async def _floor(pool: TenantPool, sid: str) -> float:
    """A bare indexed read of the rows a wake reads: no parsing, no fold."""
    started = time.perf_counter()
    async with pool.transaction(TENANT) as conn:
        start = await conn.fetchval(SELECT_NEWEST_SNAPSHOT, sid) or 1
        await conn.fetch(SELECT_SESSION_FROM, sid, start)
    return (time.perf_counter() - started) * 1000


def _lines(seeded: dict[int, Seeded], times: dict[int, dict[str, list[float]]], limit: int) -> list[dict]:
    base = statistics.median(times[min(seeded)]["wake"])
    lines = []
    for n, (_, last, snapshot_seq, snapshot_bytes, state_bytes) in seeded.items():
        t = times[n]
        wake = statistics.median(t["wake"])
        lines.append({
            "bench": "wake_ms", "events": n, **summary(t["wake"]),
            "snapshot_seq": snapshot_seq, "events_read": last - (snapshot_seq - 1 if snapshot_seq else 0),
            "snapshot_bytes": snapshot_bytes, "snapshot_at_end_bytes": state_bytes,
            "snapshot_at_end_fits_record": state_bytes <= limit,
            "resume_p50": round(statistics.median(t["resume"]), 3),
            "floor_p50": round(statistics.median(t["floor"]), 3),
            "ratio_to_floor": round(wake / statistics.median(t["floor"]), 2),
            "before_p50": round(statistics.median(t["full"]), 3), "before_p99": round(max(t["full"]), 3),
            "ratio_to_1k": round(wake / base, 2), "speedup": round(statistics.median(t["full"]) / wake, 2)})
    return lines


if __name__ == "__main__":
    for line in asyncio.run(run()):
        print(json.dumps(line))
