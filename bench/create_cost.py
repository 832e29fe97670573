"""`python -m bench.create_cost`: what a flood's creates cost the machine (issue 34), by process.

The fair-share figure's slowest batch is the one that meets the `burst` plan's creates: 300
sessions accepted in 6 s, each queued behind its tenant's running-sessions quota. This measures
one such create, and one the gateway refuses (429), away from everything else: a tenant with
`sessions_per_minute` 300 and `running_sessions` 1 sends `RATE` creates a second for `SECONDS`
(open loop, as `bench.flood` does). The first round is accepted and queued; the second, over the
minute's quota, is refused. Each round is one `bench.step_cost.window` from the first create
until every accepted one has its archived row, plus a second: CPU per create of every process
on the path (the gateway included), Kafka requests and Postgres statements per create.

The one running session waits for a declared tool's result nobody sends (`noop_client`), holding
its tenant's one slot at no cost, so every later create stays queued and nothing else runs.

Starts its own brain, runner, archiver and gateway (the bench policies); about a minute.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench import step_cost
from bench.client_tools import ECHO
from bench.flood import Flood, as_tenant, body
from bench.harness import RUNNING_TOTAL, service
from tests.e2e.stack import Stack

POLICIES = Path(__file__).resolve().parent / "policies"
POLICY = "noop_client"
RATE, SECONDS = 50.0, 6.0  # the `burst` plan's: ten times 300 a minute, for the 6 s its quota admits
PATH = ("gateway", "brain", "runner", "archiver", "broker", *step_cost.POSTGRES)


async def _archived(conn: Any, tenant: str, n: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while (await as_tenant(conn, tenant, "SELECT count(*) AS n FROM sessions"))[0]["n"] < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {n} sessions of {tenant} archived within {timeout_s:g} s")
        await asyncio.sleep(0.2)


async def _cancelled(client: httpx.AsyncClient, conn: Any, tenant: str, sessions: list[str]) -> None:
    """Every session ended: queued ones left behind would count as a tenant wanting slots in the
    brains' share (migration 0032) long after this bench, and the waiting one would hold its slot."""
    room = asyncio.Semaphore(10)

    async def cancel(session_id: str) -> None:
        async with room:
            while (answer := await client.post(f"/v1/sessions/{session_id}/cancel", params={"wait": "false"})
                   ).status_code == 429:
                await asyncio.sleep(float(answer.headers.get("retry-after", "1")))
            answer.raise_for_status()
    await asyncio.gather(*(cancel(s) for s in sessions))
    deadline = time.monotonic() + 60
    while (await as_tenant(conn, tenant, "SELECT count(*) AS n FROM sessions WHERE status <> 'ended'"))[0]["n"]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"sessions of {tenant} still open 60 s after their cancel")
        await asyncio.sleep(0.5)


async def measure(stack: Stack) -> list[dict[str, Any]]:
    tenant = f"bench-creates-{uuid.uuid4().hex[:8]}"
    key, admin = stack.api_key("bench", "user", tenant=tenant), stack.api_key("adam", "admin", tenant)
    conn = await service()
    lines, archived, sessions = [], 1, []
    try:
        async with httpx.AsyncClient(base_url=stack.url, timeout=60,
                                     headers={"Authorization": f"Bearer {key}"}) as client:
            (await client.put("/v1/quotas", json={"sessions_per_minute": 300, "running_sessions": 1},
                              headers={"Authorization": f"Bearer {admin}"})).raise_for_status()
            first = await client.post("/v1/sessions", json=body("first", POLICY, tools=[ECHO]))
            first.raise_for_status()
            sessions.append(first.json()["session_id"])
            await _archived(conn, tenant, 1)
            for expected in ("accepted", "refused"):
                flood = Flood(policy=POLICY, config={"tools": [ECHO]})
                async with step_cost.window(path=PATH) as window:
                    await flood.run(client, RATE, SECONDS)
                    archived += len(flood.accepted)
                    sessions += flood.accepted
                    await _archived(conn, tenant, archived)
                    await asyncio.sleep(1.0)  # the archiver's and the brain's last commits
                sent = sum(flood.answers.values())
                lines.append({"bench": "create_cost", "round": expected, "policy": POLICY,
                              "sent_per_s": RATE, "answers": dict(sorted(flood.answers.items())),
                              **window.figures(sent)})
            await _cancelled(client, conn, tenant, sessions)
    finally:
        await conn.close()
    return lines


def run() -> list[dict[str, Any]]:
    stack = Stack(Path(tempfile.mkdtemp(prefix="wakeline-bench-creates-")))
    try:
        for name in ("archiver", "runner", "brain"):
            stack.start(name, WAKELINE_POLICY_DIR=str(POLICIES),
                        **({"WAKELINE_RUNNING_SESSIONS_TOTAL": str(RUNNING_TOTAL)} if name == "brain" else {}))
        stack.start("gateway", kind="gateway")
        stack.wait_gateway()
        time.sleep(8)  # group joins and partition assignment, before anything is measured
        return asyncio.run(measure(stack))
    finally:
        stack.stop_all()


def main() -> None:
    for line in run():
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
