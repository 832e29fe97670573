"""Cross-tenant isolation through the real TenantPool: 20 tenants interleaved on a pool of
3 connections, concurrently, reading and writing; zero leaks.

test_postgres_tenancy.py checks the basics one transaction at a time. Here every pooled
connection serves many tenants in turn while others run, so a tenant setting that outlives
its transaction, or a row that slips past row-level security, shows up as a foreign, missing
or extra row. The run is made twice: with asyncpg's reset on release (its RESET ALL would
also clear a session-wide setting) and without it, which leaves `set_config(..., true)`
as the only thing ending a tenant's scope.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest

from conftest_pg import fresh_session_id, fresh_tenant, insert_event, new_event, require_postgres
from gateway_harness import Seeder, created, draft
from wakeline.evidence.checkpoints import KEY_BYTES, write_checkpoint
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings

pytestmark = pytest.mark.postgres

TENANTS = 20
POOL_SIZE = 3
TRANSACTIONS = 300
SCHEDULE = ("read",) * 7 + ("write", "system", "fail")  # transaction i runs SCHEDULE[i % 10]
CHECKPOINT_KEY = b"k" * KEY_BYTES
SESSION_TABLES = ("sessions", "events", "event_keys", "session_keys")
WHO_AM_I = "SELECT pg_backend_pid() AS pid, current_setting('wakeline.tenant', true) AS tenant"
# Reads are limited to the run's own session ids: event_keys has no tenant index, so an
# unlimited read would scan every row of the shared database, hundreds of times.
ROWS_PER_SESSION = ("SELECT tenant, session_id, count(*) AS n FROM {table} "
                    "WHERE session_id = ANY($1::text[]) GROUP BY tenant, session_id")
ROWS_WITHOUT_TENANT = ("SELECT (SELECT count(*) FROM events WHERE session_id = ANY($1::text[])) "
                       "+ (SELECT count(*) FROM event_keys WHERE session_id = ANY($1::text[])) "
                       "+ (SELECT count(*) FROM sessions WHERE session_id = ANY($1::text[])) "
                       "+ (SELECT count(*) FROM checkpoints)")


@dataclass
class Owned:
    """One tenant's sessions (session_id -> event count) and checkpoint ids.

    A write enters `attempted` before its transaction and `committed` after it commits, so
    a read running alongside must see every committed session and nothing unattempted.
    """

    committed: dict[str, int] = field(default_factory=dict)
    attempted: dict[str, int] = field(default_factory=dict)
    checkpoints: set[uuid.UUID] = field(default_factory=set)


@dataclass(frozen=True)
class Borrow:
    """One transaction on one pooled connection."""

    pid: int
    kind: str
    tenant: str | None  # None: system_transaction


@dataclass
class Run:
    """The pool, its tenants, every session id any of them wrote or tried to, and the
    transactions in the order each connection served them."""

    pool: TenantPool
    tenants: dict[str, Owned]
    session_ids: list[str] = field(default_factory=list)
    ledger: list[Borrow] = field(default_factory=list)


async def _keep_session_state(conn: asyncpg.Connection) -> None:
    """No RESET ALL on release, like a transaction-mode pooler (pgbouncer) between clients."""


@pytest.mark.parametrize("reset", [None, _keep_session_state],
                         ids=["asyncpg-reset", "no-reset-on-release"])
async def test_twenty_tenants_interleaved_on_three_connections_see_only_their_own_rows(
        reset, tmp_path) -> None:
    await require_postgres()
    async with TenantPool(CommonSettings().postgres_dsn, min_size=POOL_SIZE, max_size=POOL_SIZE,
                          reset=reset) as pool:
        run = Run(pool, {fresh_tenant(): Owned() for _ in range(TENANTS)})
        await asyncio.gather(*(seed_tenant(run, tenant, k, tmp_path)
                               for k, tenant in enumerate(run.tenants)))
        results = await asyncio.gather(*(run_scheduled(run, i) for i in range(TRANSACTIONS)))
        assert all(owned.attempted == owned.committed for owned in run.tenants.values())
        final = [await read_own(run, tenant) for tenant in run.tenants]  # now exactly what each committed

    assert [p for problems in results + final for p in problems] == []
    # Every scheduled transaction reached its checks. Writes go through Seeder, unrecorded.
    recorded = Counter(k for k in (SCHEDULE[i % len(SCHEDULE)] for i in range(TRANSACTIONS)) if k != "write")
    assert Counter(b.kind for b in run.ledger) == recorded + Counter(read=TENANTS)
    assert_connections_were_shared(run.ledger)


async def seed_tenant(run: Run, tenant: str, k: int, directory: Path) -> None:
    """1-3 sessions of 1-4 events (counts differ between tenants) and one signed checkpoint."""
    owned = run.tenants[tenant]
    for s in range(1 + k % 3):
        messages = [draft("user_message", f"cmd-{uuid.uuid4()}", text=f"m{m}") for m in range((k + s) % 4)]
        session_id = fresh_session_id()
        run.session_ids.append(session_id)
        events = await Seeder(run.pool, tenant).session([created(), *messages], session_id)
        owned.committed[session_id] = owned.attempted[session_id] = len(events)
    checkpoint = await write_checkpoint(run.pool, CHECKPOINT_KEY, tenant, directory=directory)
    owned.checkpoints.add(checkpoint.id)


async def run_scheduled(run: Run, i: int) -> list[str]:
    """Transaction i: consecutive ones belong to different tenants, so they interleave."""
    tenants = list(run.tenants)
    tenant, neighbour = tenants[i * 7 % TENANTS], tenants[(i * 7 + 1) % TENANTS]
    kind = SCHEDULE[i % len(SCHEDULE)]
    if kind == "read":
        return await read_own(run, tenant)
    if kind == "write":
        await write_session(run, tenant)
    elif kind == "fail":
        await write_then_fail(run, tenant, neighbour if i // 10 % 2 else None)
    else:
        return await read_without_tenant(run)
    return []


async def read_own(run: Run, tenant: str) -> list[str]:
    owned = run.tenants[tenant]
    committed_before = dict(owned.committed)
    async with run.pool.transaction(tenant) as conn:
        who = await conn.fetchrow(WHO_AM_I)
        run.ledger.append(Borrow(who["pid"], "read", tenant))
        view = {table: {(r["tenant"], r["session_id"]): r["n"]
                        for r in await conn.fetch(ROWS_PER_SESSION.format(table=table), run.session_ids)}
                for table in SESSION_TABLES}
        checkpoints = {(r["tenant"], r["id"]) for r in await conn.fetch("SELECT tenant, id FROM checkpoints")}
    problems = [f"tenant setting {who['tenant']!r}"] if who["tenant"] != tenant else []
    if checkpoints != {(tenant, c) for c in owned.checkpoints}:
        problems.append(f"checkpoints: {checkpoints}")
    for table, counts in view.items():
        problems += view_problems(tenant, table, counts, committed_before, owned.attempted)
    return [f"{tenant} on pid {who['pid']}: {p}" for p in problems]


def view_problems(tenant: str, table: str, counts: dict[tuple[str, str], int],
                  committed_before: dict[str, int], attempted: dict[str, int]) -> list[str]:
    """What a tenant's read of `table` got wrong; [] when it saw exactly its own rows."""
    want = {sid: 1 if table in ("sessions", "session_keys") else n for sid, n in attempted.items()}
    foreign = sorted(key for key in counts if key[0] != tenant)
    seen = {sid: n for (owner, sid), n in counts.items() if owner == tenant}
    missing = sorted(committed_before.keys() - seen.keys())
    wrong = {sid: n for sid, n in seen.items() if want.get(sid) != n}
    names = ("foreign rows", "missing committed sessions", "unknown or miscounted sessions")
    return [f"{table}: {name}: {found}" for name, found in zip(names, (foreign, missing, wrong)) if found]


async def write_session(run: Run, tenant: str) -> None:
    owned, session_id = run.tenants[tenant], fresh_session_id()
    drafts = [created(), draft("user_message", f"cmd-{uuid.uuid4()}", text="written concurrently")]
    run.session_ids.append(session_id)
    owned.attempted[session_id] = len(drafts)
    await Seeder(run.pool, tenant).session(drafts, session_id)
    owned.committed[session_id] = len(drafts)


async def write_then_fail(run: Run, tenant: str, neighbour: str | None) -> None:
    """Writes an event of its own, then fails mid-transaction: the event must never be seen.

    With a neighbour, the failure is row-level security refusing that tenant's row;
    without, an application error.
    """
    own, foreign = fresh_session_id(), fresh_session_id()
    run.session_ids += [own, foreign]
    error, message = ((asyncpg.InsufficientPrivilegeError, "row-level security") if neighbour
                      else (RuntimeError, "application error"))
    with pytest.raises(error, match=message):
        async with run.pool.transaction(tenant) as conn:
            run.ledger.append(Borrow(await conn.fetchval("SELECT pg_backend_pid()"), "fail", tenant))
            await insert_event(conn, new_event(tenant, own))
            if neighbour is None:
                raise RuntimeError("application error mid-transaction")
            await insert_event(conn, new_event(neighbour, foreign))


async def read_without_tenant(run: Run) -> list[str]:
    async with run.pool.system_transaction() as conn:
        who = await conn.fetchrow(WHO_AM_I)
        run.ledger.append(Borrow(who["pid"], "system", None))
        visible = await conn.fetchval(ROWS_WITHOUT_TENANT, run.session_ids)
    problems = [f"tenant setting {who['tenant']!r} outlived its transaction"] if who["tenant"] else []
    problems += [f"{visible} tenant rows visible"] if visible else []
    return [f"system transaction on pid {who['pid']}: {p}" for p in problems]


def assert_connections_were_shared(ledger: list[Borrow]) -> None:
    """At most POOL_SIZE connections served everything, going from one tenant to another,
    from a tenant to the system transaction, and from a failed transaction to another tenant."""
    by_pid: dict[int, list[Borrow]] = {}
    for borrow in ledger:
        by_pid.setdefault(borrow.pid, []).append(borrow)
    handovers = Counter(f"{a.kind}->{b.kind}" for uses in by_pid.values()
                        for a, b in zip(uses, uses[1:]) if a.tenant != b.tenant)
    tenants_per_pid = {pid: len({b.tenant for b in uses} - {None}) for pid, uses in by_pid.items()}
    assert len(by_pid) <= POOL_SIZE, tenants_per_pid
    assert max(tenants_per_pid.values()) > 1, tenants_per_pid
    assert all(handovers[h] > 0 for h in ("read->read", "read->system", "fail->read")), handovers


async def test_a_named_pool_shows_its_service_in_pg_stat_activity_after_every_reset() -> None:
    """application_name is a connection parameter, not a SET: the reset on release (RESET ALL)
    keeps it, so an operator reading pg_stat_activity sees which service each backend serves."""
    await require_postgres()
    async with TenantPool(CommonSettings().postgres_dsn, "wakeline-test-pool", min_size=1, max_size=1) as pool:
        for _ in range(2):
            async with pool.transaction(fresh_tenant()) as conn:
                pid = await conn.fetchval("SELECT pg_backend_pid()")
                named = await conn.fetchval("SELECT application_name FROM pg_stat_activity WHERE pid = $1", pid)
                assert named == "wakeline-test-pool"
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=1) as pool:
        assert await pool.system_statement(lambda c: c.fetchval("SELECT current_setting('application_name')")) == ""
