"""Fair share (issue 34): one tenant floods at ten times its quota while another runs its sessions.

Tenant `steady` runs batches of sessions of ten no-op tool calls (`noop10`), a batch created
at once over HTTP; a session's time runs from just before its create was sent to the brain's
`ts` of its `session_ended` (the `sessions` row's `updated_at`): one clock, this machine's,
so the wait in the gateway and on the inbox counts too. Quiet: `steady` alone, `batches`
batches one after the other. Flooded: tenant `flood`, whose admin set it `per_minute`
sessions a minute and `running` running sessions, creates sessions over HTTP at ten times
that rate for `flood_s`, open loop (a request every 1/rate s, whatever the answers), while
`steady` runs the same batches, one every `pace_s` from `warm_s` into the flood until it ends.
Two plans (`PLANS`): `burst`, where the minute's quota may be taken at once, and `paced`,
where commands per second hold it to the same rate spread evenly.

Reported per plan: `steady`'s p50/p99/max quiet and flooded and their ratio (the bound: p99
within 2x), how long its sessions waited before the brain took them up, each flooded batch's
slowest; `flood`'s answers by status (201/202 accepted, 429 refused), the most of its sessions
seen in each status, and how many accepted ones ended, are still open, or have no row at all
(lost) once the flood has drained for up to `drain_s`.

Needs brain, runner and archiver running with the bench policies (`bench/__main__.py`);
starts its own gateway. `python -m bench.flood` runs it alone, with services of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import asyncpg
import httpx

from bench.harness import RUNNING_TOTAL, percentile, service
from tests.e2e.stack import Stack

POLICY = "noop10"
STATUS_BY_TENANT = "SELECT status, count(*) AS n FROM sessions GROUP BY status"
ENDED_AT = ("SELECT session_id, created_at, updated_at FROM sessions WHERE session_id = ANY($1) "
            "AND status = 'ended'")
PRESENT = "SELECT status, count(*) AS n FROM sessions WHERE session_id = ANY($1) GROUP BY status"


def body(message: str, policy: str, **config: Any) -> dict[str, Any]:
    return {"message": message, "wait": False, "config": {"model": f"scripted:{policy}", "max_turns": 100, **config}}


async def as_tenant(conn: asyncpg.Connection, tenant: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    """One statement under `tenant`'s row-level security, as the services read."""
    async with conn.transaction():
        await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", tenant)
        return await conn.fetch(sql, *args)


class Timed(NamedTuple):
    """A session's seconds from its create sent to its `session_ended`, and to its `session_created`
    (the part spent before the brain took it up: in the gateway and on the inbox)."""

    end_s: float
    start_s: float


async def ended_at(conn: asyncpg.Connection, tenant: str, ids: list[str],
                   timeout_s: float) -> dict[str, tuple[float, float]]:
    """Each session's start and end (epoch seconds, the brain's `ts`) once all have ended."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = await as_tenant(conn, tenant, ENDED_AT, ids)
        if len(rows) == len(ids):
            return {r["session_id"]: (r["created_at"].timestamp(), r["updated_at"].timestamp()) for r in rows}
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(rows)} of {len(ids)} sessions of {tenant} ended within {timeout_s:g} s")
        await asyncio.sleep(0.1)


async def batch(client: httpx.AsyncClient, conn: asyncpg.Connection, tenant: str, sessions: int,
                policy: str = POLICY, timeout_s: float = 120) -> list[Timed]:
    """`sessions` sessions created at once, each timed from its create sent."""
    sent: dict[str, float] = {}

    async def create() -> None:
        at = time.time()
        created = await client.post("/v1/sessions", json=body("steady", policy))
        created.raise_for_status()
        sent[created.json()["session_id"]] = at
    await asyncio.gather(*(create() for _ in range(sessions)))
    ended = await ended_at(conn, tenant, list(sent), timeout_s)
    return [Timed(ended[sid][1] - sent[sid], ended[sid][0] - sent[sid]) for sid in sent]


@dataclass
class Flood:
    """What a flooding tenant got: answers by HTTP status (or `error`), the sessions accepted."""

    policy: str = POLICY
    config: dict[str, Any] = field(default_factory=dict)  # more of each session's config (its tools)
    answers: Counter[str] = field(default_factory=Counter)
    accepted: list[str] = field(default_factory=list)

    async def create(self, client: httpx.AsyncClient) -> None:
        try:
            answer = await client.post("/v1/sessions", json=body("flood", self.policy, **self.config))
        except httpx.HTTPError:
            self.answers["error"] += 1
            return
        self.answers[str(answer.status_code)] += 1
        if answer.status_code in (201, 202):
            self.accepted.append(answer.json()["session_id"])

    async def run(self, client: httpx.AsyncClient, per_s: float, seconds: float) -> None:
        """Open loop: the n-th create leaves at n / per_s s, whatever the earlier ones got."""
        loop = asyncio.get_running_loop()
        began, sending = loop.time(), []
        for n in range(round(per_s * seconds)):
            await asyncio.sleep(max(0.0, began + n / per_s - loop.time()))
            sending.append(asyncio.create_task(self.create(client)))
        await asyncio.gather(*sending)


async def most_seen(conn: asyncpg.Connection, tenant: str, until: asyncio.Task[Any]) -> Counter[str]:
    """The most sessions of `tenant` seen in each status, sampled every second until `until` is done."""
    most: Counter[str] = Counter()
    while not until.done():
        for row in await as_tenant(conn, tenant, STATUS_BY_TENANT):
            most[row["status"]] = max(most[row["status"]], row["n"])
        await asyncio.wait({until}, timeout=1.0)
    return most


async def drained(conn: asyncpg.Connection, tenant: str, ids: list[str], timeout_s: float) -> dict[str, int]:
    """How many of `ids` have a row in each status once all ended or `timeout_s` ran out; `no_row`: lost."""
    deadline = time.monotonic() + timeout_s
    while True:
        counts = {r["status"]: r["n"] for r in await as_tenant(conn, tenant, PRESENT, ids)}
        if counts.get("ended", 0) == len(ids) or time.monotonic() > deadline:
            return {**counts, "no_row": len(ids) - sum(counts.values())}
        await asyncio.sleep(0.5)


def figures(seconds: list[float]) -> dict[str, float]:
    return {"n": len(seconds), "p50": round(percentile(seconds, 50), 3), "p99": round(percentile(seconds, 99), 3),
            "max": round(max(seconds), 3)}


@dataclass(frozen=True)
class Plan:
    admission: str = "burst"  # what the plan's quotas let through: `burst` or `paced`
    sessions: int = 10        # a `steady` batch
    batches: int = 5          # quiet batches
    per_minute: int = 300     # `flood`'s sessions per minute; it sends ten times as many
    per_second: int | None = None  # and its commands per second (None: the default, 200)
    running: int = 20         # `flood`'s running sessions (queued past it, once that quota is enforced)
    flood_s: float = 24.0
    warm_s: float = 3.0       # the flood running before `steady`'s first flooded batch
    pace_s: float = 3.0       # a flooded batch starts every pace_s (or when the previous ends)
    drain_s: float = 90.0


async def measure(stack: Stack, plan: Plan = Plan()) -> dict[str, Any]:
    steady, flooder = f"bench-steady-{uuid.uuid4().hex[:8]}", f"bench-flood-{uuid.uuid4().hex[:8]}"
    steady_key = stack.api_key("bench", "user", tenant=steady)
    flood_key, admin_key = stack.api_key("bench", "user", tenant=flooder), stack.api_key("adam", "admin", flooder)
    conn, sampler = await service(), await service()
    limits = httpx.Limits(max_connections=100)
    try:
        async with httpx.AsyncClient(base_url=stack.url, timeout=60, limits=limits,
                                     headers={"Authorization": f"Bearer {steady_key}"}) as b, \
                httpx.AsyncClient(base_url=stack.url, timeout=60, limits=limits,
                                  headers={"Authorization": f"Bearer {flood_key}"}) as a:
            set_to = {"sessions_per_minute": plan.per_minute, "running_sessions": plan.running,
                      "commands_per_second": plan.per_second}
            (await a.put("/v1/quotas", json=set_to, headers={"Authorization": f"Bearer {admin_key}"})
             ).raise_for_status()
            await batch(b, conn, steady, 1)  # the tenant's first session (its sandbox root) goes untimed
            quiet: list[Timed] = []
            for _ in range(plan.batches):
                quiet += await batch(b, conn, steady, plan.sessions)
            flood = Flood()
            flooding = asyncio.create_task(flood.run(a, 10 * plan.per_minute / 60, plan.flood_s))
            sampling = asyncio.create_task(most_seen(sampler, flooder, flooding))
            await asyncio.sleep(plan.warm_s)
            loaded: list[list[Timed]] = []
            while not flooding.done():
                started = time.monotonic()
                loaded.append(await batch(b, conn, steady, plan.sessions))
                await asyncio.wait({flooding}, timeout=max(0.0, started + plan.pace_s - time.monotonic()))
            await flooding
            most = await sampling
            left = await drained(conn, flooder, flood.accepted, plan.drain_s)
    finally:
        await conn.close()
        await sampler.close()
    return line(plan, quiet, loaded, flood, most, left)


def line(plan: Plan, quiet: list[Timed], loaded: list[list[Timed]], flood: Flood, most: Counter[str],
         left: dict[str, int]) -> dict[str, Any]:
    flooded = [t for one in loaded for t in one]
    q, f = figures([t.end_s for t in quiet]), figures([t.end_s for t in flooded])
    ratio = round(f["p99"] / q["p99"], 2)
    return {"bench": "fair_share_flood", "admission": plan.admission, "policy": POLICY, "steady_batch": plan.sessions,
            "flood_quota": {"sessions_per_minute": plan.per_minute, "commands_per_second": plan.per_second,
                            "running_sessions": plan.running},
            "flood_sent_per_s": round(10 * plan.per_minute / 60, 2), "flood_s": plan.flood_s,
            "steady_quiet_s": q, "steady_flooded_s": f,
            "p50_ratio": round(f["p50"] / q["p50"], 2), "p99_ratio": ratio, "p99_within_2x": ratio <= 2,
            # where a flooded session's time went: before the brain took it up, and each batch's slowest
            "steady_quiet_to_start_s": figures([t.start_s for t in quiet]),
            "steady_flooded_to_start_s": figures([t.start_s for t in flooded]),
            "steady_flooded_batch_max_s": [round(max(t.end_s for t in one), 2) for one in loaded],
            "flood_answers": dict(sorted(flood.answers.items())), "flood_accepted": len(flood.accepted),
            "flood_most_seen": dict(sorted(most.items())), "flood_after_drain": dict(sorted(left.items()))}


# Burst: a minute's sessions may all come at once (the sliding window admits them in the flood's
# first 6 s). Paced: commands per second set to the same rate, so at most 5 a second come in.
PLANS = (Plan(), Plan(admission="paced", per_second=5))
# `make bench`: `burst` three times, its figure the median of the three (one run's p99 is its
# slowest of 70 sessions over the slowest of 50 quiet ones: 1.2-2.4x on the same code in one hour
# of 2026-12-06), then `paced` once.
BENCH_PLANS = (Plan(), Plan(), Plan(), PLANS[1])


def medians(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per admission plan, the median and range of the runs' ratios (`fair_share_flood_median`)."""
    out = []
    for admission in dict.fromkeys(line["admission"] for line in lines):
        runs = [line for line in lines if line["admission"] == admission]
        p99, p50 = [r["p99_ratio"] for r in runs], [r["p50_ratio"] for r in runs]
        out.append({"bench": "fair_share_flood_median", "admission": admission, "runs": len(runs),
                    "p99_ratio": statistics.median(p99), "p99_ratios": p99,
                    "p50_ratio": statistics.median(p50), "p50_ratios": p50,
                    "p99_within_2x": statistics.median(p99) <= 2,
                    "lost": sum(r["flood_after_drain"].get("no_row", 0) for r in runs)})
    return out


async def run(plans: tuple[Plan, ...] = PLANS, run_dir: Path | None = None) -> list[dict[str, Any]]:
    stack = Stack(run_dir or Path(tempfile.mkdtemp(prefix="wakeline-bench-flood-")))
    try:
        stack.start("gateway-flood", kind="gateway")
        stack.wait_gateway()
        return [await measure(stack, plan) for plan in plans]
    finally:
        stack.stop_all()


def _with_services(plans: tuple[Plan, ...], running_total: int | None) -> list[dict[str, Any]]:
    """The plans on brain, runner and archiver of their own, the brain sharing `running_total`."""
    policies = Path(__file__).resolve().parent / "policies"
    services = Stack(Path(tempfile.mkdtemp(prefix="wakeline-bench-flood-services-")))
    share = {} if running_total is None else {"WAKELINE_RUNNING_SESSIONS_TOTAL": str(running_total)}
    try:
        for name in ("archiver", "runner", "brain"):
            services.start(name, WAKELINE_POLICY_DIR=str(policies), **(share if name == "brain" else {}))
        time.sleep(8)  # group joins and partition assignment, before anything is timed
        return [{**figure, "running_total": running_total} for figure in asyncio.run(run(plans))]
    finally:
        services.stop_all()


def main(argv: list[str] | None = None) -> None:
    """`python -m bench.flood`: this section alone, with its own brain, runner and archiver;
    `--burst-only --steady 10,5`: the `burst` plan once per size of *steady*'s batch;
    `--flood-running 20,10,20,10`: once per flood running-sessions quota, in that order;
    `--running-total none,20`: its own services once per brain `WAKELINE_RUNNING_SESSIONS_TOTAL`, in
    turn, each value as many rounds as `--rounds` (the fair share off and on, side by side)."""
    parser = argparse.ArgumentParser(prog="python -m bench.flood")
    parser.add_argument("--burst-only", action="store_true", help="only the burst plan")
    parser.add_argument("--steady", default="10", help="sizes of the steady tenant's batch, comma-separated")
    parser.add_argument("--flood-running", default=str(Plan.running),
                        help="the flood's running-sessions quota, comma-separated: each plan once per value "
                             "(what a share of running sessions would give the flood, measured before building it)")
    parser.add_argument("--running-total", default=str(RUNNING_TOTAL),
                        help="the brain's share of sessions at work across tenants, comma-separated ('none': off)")
    parser.add_argument("--rounds", type=int, default=1, help="times through the --running-total values")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.steady.split(",")]
    running = [int(n) for n in args.flood_running.split(",")]
    plans = tuple(replace(plan, sessions=n, running=r) for n in sizes for r in running
                  for plan in (PLANS[:1] if args.burst_only else PLANS))
    started = time.monotonic()
    figures = []
    for _ in range(args.rounds):
        for total in args.running_total.split(","):
            for figure in _with_services(plans, None if total == "none" else int(total)):
                print(json.dumps(figure), flush=True)
                figures.append(figure)
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for f in figures:  # the runs of one brain total, flood quota and batch size: their medians
        groups.setdefault((f["running_total"], f["flood_quota"]["running_sessions"], f["steady_batch"]), []).append(f)
    for (total, running, steady), group in groups.items():
        for line in medians(group):
            print(json.dumps({**line, "running_total": total, "flood_running": running, "steady_batch": steady}))
    print(json.dumps({"bench": "section_s", "section": "fair_share_flood", "s": round(time.monotonic() - started, 1)}))


if __name__ == "__main__":
    main()
