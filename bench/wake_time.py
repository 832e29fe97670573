"""Wake time: load a session the brain does not hold (archive + Kafka tail) and fold it.

This is `SessionLoader.load` + `fold`, the code an actor runs on wake, for sessions of 1k
and 10k events stored by the archiver. Each size is woken several times; the median is
the figure, with the fold's share reported apart.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time

from bench.harness import produce_events, service, summary
from bench.synthetic import session_events
from wakeline.fold import fold
from wakeline.pg import TenantPool
from wakeline.settings import CommonSettings
from wakeline.topics import partition_for
from wakeline_brain.wake import SessionLoader, tail_consumer


async def _archived(session_id: str, n: int, timeout_s: float = 180) -> None:
    conn = await service()
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            async with conn.transaction():
                await conn.execute("SELECT set_config('wakeline.tenant', 'default', true)")
                stored = await conn.fetchval("SELECT count(*) FROM events WHERE session_id = $1", session_id)
            if stored >= n:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"archiver stored {stored}/{n}; is it running?")
            await asyncio.sleep(0.2)
    finally:
        await conn.close()


async def run(sizes: tuple[int, ...] = (1_000, 10_000), repeats: int = 5) -> list[dict]:
    settings = CommonSettings()
    results = []
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
        tail = tail_consumer(settings)
        loader = SessionLoader(pool, tail)
        await tail.start()
        try:
            for n in sizes:
                events = session_events(n)
                sid = events[0].session_id
                await produce_events(settings, events)
                await _archived(sid, n)
                totals, folds = [], []
                for _ in range(repeats):
                    started = time.perf_counter()
                    loaded = await loader.load(sid, "default", partition_for(sid, settings.partitions))
                    folded_at = time.perf_counter()
                    state = fold(loaded)
                    done = time.perf_counter()
                    assert state.last_seq == n
                    totals.append((done - started) * 1000)
                    folds.append((done - folded_at) * 1000)
                results.append({"bench": "wake_ms", "events": n, **summary(totals),
                                "fold_p50": round(statistics.median(folds), 3)})
        finally:
            await tail.stop()
    return results


if __name__ == "__main__":
    for line in asyncio.run(run()):
        print(json.dumps(line))
