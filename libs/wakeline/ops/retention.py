"""Retention: drop whole monthly partitions of `events` past every tenant's window.

`python -m wakeline.ops.retention apply [--older-than 90d] [--dry-run]`, as the maintenance
role. The rules live in Postgres (0004_retention.sql): a partition goes only when every
tenant with rows in it is past its window (its `retention_policies.keep`, else the
`--older-than` default, else never), and each drop is logged with its chain heads in
`retention_log`. This module lists candidates and asks for each drop; it decides nothing
the database does not check again. Setting a tenant's window is not here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from wakeline.runtime.settings import CommonSettings

# Session-level advisory lock, also taken per drop inside drop_events_partition: one
# retention run at a time, so two runs never race for the same partition.
_LOCK = "SELECT pg_advisory_lock(hashtext('wakeline.ops.retention'))"
_CANDIDATES = "SELECT * FROM events_retention_candidates($1, $2)"
_DROP = "SELECT * FROM drop_events_partition($1, $2, $3)"
# A drop waits at most 2s for its lock on events (lock_timeout in the function) and may
# lose a deadlock to a writer of the same month: both are worth a short retry.
_RETRYABLE = (asyncpg.DeadlockDetectedError, asyncpg.LockNotAvailableError)
_ATTEMPTS = 3
_WINDOW = re.compile(r"^(\d+)([hdw])$")
_UNITS = {"h": "hours", "d": "days", "w": "weeks"}


class RetentionSettings(CommonSettings):
    # The only role allowed to drop partitions (EXECUTE on drop_events_partition).
    postgres_maintenance_dsn: str = (
        "postgresql://wakeline_maintenance@127.0.0.1:15432/wakeline"
    )


def parse_window(text: str) -> timedelta:
    """`90d`, `12w`, `36h` → timedelta."""
    match = _WINDOW.match(text)
    if not match or int(match[1]) == 0:
        raise ValueError(f"expected a positive window like 90d, 12w or 36h, got {text!r}")
    return timedelta(**{_UNITS[match[2]]: int(match[1])})


async def plan_retention(dsn: str, older_than: timedelta | None,
                         now: datetime) -> list[dict[str, Any]]:
    """Every partition that ended before `now`, with the tenants that still keep it."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(_CANDIDATES, now, older_than)
    finally:
        await conn.close()
    return [dict(row) for row in rows]


async def apply_retention(dsn: str, older_than: timedelta | None,
                          now: datetime) -> list[dict[str, Any]]:
    """Drop every droppable partition, each in its own transaction; returns the log rows."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(_LOCK)
        candidates = await conn.fetch(_CANDIDATES, now, older_than)
        dropped = []
        for candidate in candidates:
            if candidate["blocking_tenants"]:
                continue
            dropped.append(await _drop(conn, candidate["partition_name"], now, older_than))
        return dropped
    finally:
        await conn.close()  # releases the advisory lock


async def _drop(conn: asyncpg.Connection, name: str, now: datetime,
                older_than: timedelta | None) -> dict[str, Any]:
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            return _log_entry(await conn.fetchrow(_DROP, name, now, older_than))
        except _RETRYABLE:
            if attempt == _ATTEMPTS:
                raise
            await asyncio.sleep(0.5 * attempt)
    raise AssertionError("unreachable")


def _log_entry(row: asyncpg.Record) -> dict[str, Any]:
    entry = dict(row)
    for key in ("chain_heads", "tenant_windows"):
        entry[key] = json.loads(entry[key])
    return entry


def _json_line(entry: dict[str, Any]) -> str:
    return json.dumps(entry, default=lambda v: v.isoformat(), sort_keys=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wakeline retention")
    commands = parser.add_subparsers(dest="command", required=True)
    apply = commands.add_parser("apply", help="drop partitions past every tenant's window")
    apply.add_argument("--older-than", type=parse_window, default=None,
                       help="default window for tenants without a policy (e.g. 90d); "
                            "without it such tenants are never dropped")
    apply.add_argument("--dry-run", action="store_true", help="list, drop nothing")
    return parser


async def _run(args: argparse.Namespace, settings: RetentionSettings) -> None:
    now = datetime.now(UTC)
    dsn = settings.postgres_maintenance_dsn
    if not args.dry_run:
        for entry in await apply_retention(dsn, args.older_than, now):
            print(_json_line(entry))
        return
    for candidate in await plan_retention(dsn, args.older_than, now):
        if candidate["blocking_tenants"]:
            print(f"retention: keeping {candidate['partition_name']}: tenants inside their "
                  f"window: {', '.join(candidate['blocking_tenants'])}", file=sys.stderr)
        else:
            print(_json_line({**candidate, "dry_run": True}))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        asyncio.run(_run(args, RetentionSettings()))
    except (asyncpg.PostgresError, OSError) as exc:
        print(f"retention: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
