"""Bytes per archived event at 1M events, each figure on a database of its own.

    python -m bench.storage_fresh [ORDER] [UPTO]

ORDER is how the 1M events of `bench.audit_sessions` arrive: `sessions` (the audit
loader's order: 200 sessions at a time, each session's 50 events together, the sessions'
times spread over a year, so every time-keyed index is written in random order) or
`arrival` (all events in `ts` order, 10,000 per insert, as the archiver stores a live log:
what the brain seals now is archived next). UPTO applies only the migrations numbered
below it (to measure the schema before a migration beside the one after it).

Each run creates a database, loads it as the service role through `bench.audit_load`,
runs `VACUUM ANALYZE`, measures `storage_per_event`, then (with the whole schema) runs
`wakeline pack-months` as it would run on the day (the synthetic year ends 2026-12-21, so
every month before the current one has closed) and measures again; it prints one JSON line
and drops the database. Not part of `make bench` (a load takes about a minute); the figures it gave
are in docs/history/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from bench import audit_load
from bench.harness import superuser
from wakeline.ops.closed_months import pack_closed_months
from wakeline.storage.migrate import MIGRATIONS_DIR, apply_migrations
from wakeline.runtime.settings import AdminSettings


async def measure(order: str = "sessions", upto: int | None = None, pack: bool = True,
                  sessions: int = audit_load.SESSIONS) -> dict:
    name = f"wakeline_storage_{uuid.uuid4().hex[:8]}"
    conn = await superuser()
    try:
        await conn.execute(f'CREATE DATABASE "{name}" OWNER wakeline_owner')
    finally:
        await conn.close()
    previous = os.environ.get("WAKELINE_POSTGRES_DATABASE")
    os.environ["WAKELINE_POSTGRES_DATABASE"] = name
    try:
        settings = AdminSettings()
        dsn = settings.postgres_admin_dsn.rsplit("/", 1)[0] + "/" + name
        with tempfile.TemporaryDirectory() as chosen:
            migrations = Path(str(MIGRATIONS_DIR))
            if upto is not None:
                for sql in sorted(migrations.glob("*.sql")):
                    if int(sql.name.split("_", 1)[0]) < upto:
                        shutil.copy(sql, Path(chosen) / sql.name)
                migrations = Path(chosen)
            applied = await apply_migrations(dsn, migrations)
        started = time.perf_counter()
        loaded = await audit_load.ensure_loaded(settings.postgres_dsn, sessions, order=order)
        storage = await audit_load.storage_per_event()
        out = {**storage, "bench": "storage_fresh", "order": order, "schema": applied[-1], "load": loaded}
        if pack:
            pack_started = time.perf_counter()
            _, packed = await pack_closed_months(dsn, datetime.now(UTC))
            packed_storage = await audit_load.storage_per_event()
            out["after_pack_months"] = {
                "bytes_per_event": packed_storage["bytes_per_event"],
                "index_per_event": packed_storage["index_per_event"],
                "indexes_packed": len(packed), "months": len({p.partition for p in packed}),
                "s": round(time.perf_counter() - pack_started, 1)}
        return {**out, "s": round(time.perf_counter() - started, 1)}
    finally:
        if previous is None:
            os.environ.pop("WAKELINE_POSTGRES_DATABASE", None)
        else:
            os.environ["WAKELINE_POSTGRES_DATABASE"] = previous
        conn = await superuser()
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


def main(argv: list[str]) -> None:
    order = argv[0] if argv else "sessions"
    upto = int(argv[1]) if len(argv) > 1 else None
    # An older schema (UPTO) is measured as its code left it: pack-months is this code's.
    print(json.dumps(asyncio.run(measure(order, upto, pack=upto is None))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
