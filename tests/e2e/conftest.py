"""End-to-end fixtures: the four services as OS processes on the real broker and database."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.e2e.stack import Stack
from wakeline.settings import CommonSettings

SERVICES = ("archiver", "runner", "brain", "gateway")


def _reachable() -> str | None:
    async def probe() -> None:
        conn = await asyncpg.connect(CommonSettings().postgres_dsn, timeout=5)
        await conn.close()
    try:
        asyncio.run(probe())
    except Exception as err:  # noqa: BLE001 - any failure means "not there"
        return f"Postgres unreachable: {err!r}"
    return None


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    problem = _reachable()
    if problem:
        message = f"{problem}; run `make up` first (make test does)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    stack = Stack(tmp_path_factory.mktemp("e2e"))
    try:  # a failed start or warm-up must not leave processes in the consumer groups
        for name in SERVICES:
            stack.start(name)
        stack.wait_gateway()
        stack.headers = {"Authorization": f"Bearer {stack.api_key()}"}  # user:local in tenant default
        _warm_up(stack)
        yield stack
    finally:
        stack.stop_all()
        print(stack.report())


def _warm_up(stack: Stack, timeout: float = 120) -> None:
    """Waits until a session goes all the way through: a previous module's processes may
    still hold group memberships until their session timeouts expire."""
    with httpx.Client(base_url=stack.url, timeout=30, headers=stack.headers) as client:
        response = client.post("/v1/sessions", json={"message": "warm-up", "wait": False,
                                                     "config": {"model": "scripted:tools3"}})
        assert response.status_code in (201, 202), response.text
        sid = response.json()["session_id"]
        wait_ended(client, stack, sid, timeout=timeout)


@pytest.fixture
def client(stack):
    with httpx.Client(base_url=stack.url, timeout=30, headers=stack.headers) as client:
        yield client


@pytest.fixture
def auditor(stack):
    """Reads every session of tenant default: sessions made by Kafka producers belong to their
    own actor (user:kcat), which a user key rightly cannot see."""
    with httpx.Client(base_url=stack.url, timeout=30,
                      headers={"Authorization": f"Bearer {stack.api_key('e2e-auditor', 'auditor')}"}) as client:
        yield client


def create_session(client: httpx.Client, policy: str, message: str = "go", **config) -> str:
    response = client.post("/v1/sessions", json={"message": message,
                                                 "config": {"model": f"scripted:{policy}", **config}})
    assert response.status_code == 201, response.text
    return response.json()["session_id"]


def wait_for(predicate, timeout: float, what: str, stack: Stack | None = None, every: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{stack.report() if stack else ''}")


def session_status(client: httpx.Client, session_id: str) -> dict | None:
    response = client.get(f"/v1/sessions/{session_id}")
    return response.json() if response.status_code == 200 else None


def wait_ended(client: httpx.Client, stack: Stack, session_id: str, timeout: float = 90) -> dict:
    def ended():
        s = session_status(client, session_id)
        return s if s and s["status"] == "ended" else None
    return wait_for(ended, timeout, f"session {session_id} to end", stack)


def pg_rows(sql: str, *args, tenant: str = "default") -> list[asyncpg.Record]:
    async def query():
        conn = await asyncpg.connect(CommonSettings().postgres_dsn)
        try:
            async with conn.transaction():
                await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", tenant)
                return await conn.fetch(sql, *args)
        finally:
            await conn.close()
    return asyncio.run(query())


def stored_events(session_id: str):
    from wakeline_brain.wake import EVENT_COLUMNS, event_from_row
    rows = pg_rows(f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = $1 ORDER BY seq", session_id)
    return [event_from_row(r) for r in rows]


def assert_log_whole(session_id: str):
    """Every event once, seq dense from 1, hash chain valid: what every e2e test ends on."""
    from wakeline.chain import first_broken_seq
    events = stored_events(session_id)
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), f"seq not dense: {seqs}"
    assert first_broken_seq(events) is None
    return events


def new_id() -> str:
    return str(uuid.uuid4())


def sandbox_work(stack: Stack, session_id: str, tenant: str = "default") -> Path:
    return stack.run_dir / "sandboxes" / tenant / session_id / "work"
