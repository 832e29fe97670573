"""Drives a chaos run: the services as processes, scripted sessions, random kill -9 and restart.

2 brains, 2 runners, 1 archiver and 1 gateway run as separate processes (tests/e2e/stack.py).
While ~`in_flight` sessions of the `chaos` policy run, a random one of `Plan.targets` (by
default a brain, a runner or the archiver; `BRAINS` for issue 37's brain churn) is killed
with SIGKILL every ~`interval_s` and restarted under the same host name (as a supervisor
or a StatefulSet pod would) or, with `new_names`, under a name never used before (as a
replacement machine would), with a log of its own, so each incarnation's ownership of
brain partitions and its part in a recovery can be read back. Then the run drains and
`figures` and `timelines` do the counting.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.chaos import figures, ownership, timelines
from tests.e2e.stack import Service, Stack
from wakeline.storage.event_rows import SELECT_LIST, event_from_row
from wakeline.contract.events import Event, parse_event
from wakeline.transport.kafka_io import kafka_auth
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import EVENTS
from wakeline_runner.session_dirs import session_dir

POLICIES = Path(__file__).resolve().parent / "policies"
SLOTS = {"archiver-1": "archiver", "runner-1": "runner", "runner-2": "runner", "brain-1": "brain",
         "brain-2": "brain", "gateway-1": "gateway"}
KILLABLE = ("archiver-1", "runner-1", "runner-2", "brain-1", "brain-2")
BRAINS = ("brain-1", "brain-2")
WORST_TIMELINES = 5  # how many of the slowest recoveries the result spells out


@dataclass
class Plan:
    kills: int = 100
    interval_s: float = 4.0        # mean time between kills, jittered by ±50%
    in_flight: int = 20            # sessions kept running while the kills go on
    max_sessions: int = 400
    restart_delay_s: float = 0.5   # a supervisor's backoff before the restart
    drain_s: float = 300.0         # after the last kill, how long sessions may take to end
    seed: int | None = None
    targets: tuple[str, ...] = KILLABLE  # the slots a kill picks from
    new_names: bool = False        # a restarted process takes a host name never used before


@dataclass
class Processes:
    stack: Stack
    current: dict[str, Service] = field(default_factory=dict)
    incarnations: dict[str, int] = field(default_factory=dict)
    killed_at: dict[str, float] = field(default_factory=dict)   # incarnation log name -> kill time

    def start(self, slot: str, new_name: bool = False) -> Service:
        n = self.incarnations[slot] = self.incarnations.get(slot, 0) + 1
        # A brain's host name is its static group membership (BrainSettings.group_instance_id).
        host = f"{slot}-{n}" if new_name else slot
        service = self.stack.start(f"{slot}.{n}", SLOTS[slot], WAKELINE_HOST=host,
                                   WAKELINE_POLICY_DIR=str(POLICIES))
        self.current[slot] = service
        return service

    def kill(self, slot: str) -> float:
        service = self.current[slot]
        at = time.time()
        service.kill9()
        self.killed_at[service.name] = at
        return at


class Sessions:
    """Creates sessions through the gateway; asks Postgres (the archive) which have ended."""

    def __init__(self, stack: Stack, conn: asyncpg.Connection):
        self.client = httpx.AsyncClient(base_url=stack.url, timeout=30, headers=stack.headers)
        self.conn = conn
        self.started: list[str] = []
        self.ended: set[str] = set()

    async def start_one(self) -> None:
        response = await self.client.post("/v1/sessions", json={
            "message": "chaos", "wait": False, "config": {"model": "scripted:chaos"}})
        response.raise_for_status()
        self.started.append(response.json()["session_id"])

    async def refresh(self) -> None:
        async with self.conn.transaction():
            await self.conn.execute("SELECT set_config('wakeline.tenant', 'default', true)")
            rows = await self.conn.fetch("SELECT session_id FROM events WHERE session_id = ANY($1)"
                                         " AND type = 'session_ended'", self.started)
        self.ended = {r["session_id"] for r in rows}

    @property
    def in_flight(self) -> int:
        return len(self.started) - len(self.ended)


async def run(plan: Plan, run_dir: Path, say=print) -> dict:
    rng = random.Random(plan.seed)
    settings = CommonSettings()
    procs = Processes(Stack(run_dir))
    for slot in SLOTS:
        procs.start(slot)
    conn = None
    try:
        procs.stack.wait_gateway(60)
        procs.stack.headers = {"Authorization": f"Bearer {procs.stack.api_key('chaos')}"}
        conn = await asyncpg.connect(settings.postgres_dsn)
        sessions = Sessions(procs.stack, conn)
        await _warm_up(sessions, say)
        sessions.started.clear()
        began = time.time()
        brain_kills = await _kill_loop(plan, rng, procs, sessions, say)
        last_kill = time.time()
        await _drain(plan, sessions, say)
        drained = time.time()
        await sessions.client.aclose()
    finally:
        procs.stack.stop_all()
        if conn is not None:
            await conn.close()
    logged = figures.by_session(await _logged_events(settings, began, set(sessions.started)))
    stored = await _stored_events(settings, sessions.started)
    runs = {sid: _runs(run_dir, sid) for sid in sessions.started}
    brain_logs = _brain_logs(run_dir)
    changes = [change for name, lines in brain_logs.items()
               for change in ownership.changes_from_log(name, lines, procs.killed_at.get(name))]
    unowned = ownership.longest_unowned(changes, settings.partitions, began, drained)
    recoveries = timelines.recovery_timelines(brain_kills, changes, logged, settings.partitions,
                                              [timelines.BrainLog.parse(n, lines) for n, lines in brain_logs.items()])
    return {
        "chaos": "kill -9 loop", "targets": list(plan.targets), "new_names": plan.new_names, "seed": plan.seed,
        "interval_s": plan.interval_s, "kills": plan.kills, "brain_kills": len(brain_kills),
        "brain_kill_times": [[round(at, 3), name] for at, name in brain_kills],
        "kill_phase_s": round(last_kill - began, 1), "drain_s": round(drained - last_kill, 1),
        **figures.correctness(sessions.started, logged, stored, runs),
        "next_event_after_brain_kill": figures.recovery_after_brain_kills(brain_kills, changes, logged,
                                                                         settings.partitions),
        "longest_partition_unowned_s": round(max(unowned.values()), 2) if unowned else None,
        "unowned_s_by_partition": {p: round(s, 2) for p, s in unowned.items()},
        "recovery_timelines": {kind: {"breakdown": timelines.breakdown(of_kind),
                                      "worst": [t.as_row() for t in timelines.worst(of_kind, WORST_TIMELINES)]}
                               for kind in ("affected", "survivors")
                               for of_kind in [[t for t in recoveries if t.kind == kind]]},
    }


async def _warm_up(sessions: Sessions, say, timeout: float = 180) -> None:
    """One session all the way through: every process has joined its group."""
    await sessions.start_one()
    deadline = time.monotonic() + timeout
    while not sessions.ended:
        if time.monotonic() > deadline:
            raise RuntimeError("the warm-up session did not end; see the service logs")
        await asyncio.sleep(0.5)
        await sessions.refresh()
    say("chaos: warm-up session ended; starting the kills")


async def _kill_loop(plan: Plan, rng: random.Random, procs: Processes, sessions: Sessions, say) -> list:
    brain_kills: list[tuple[float, str]] = []
    for k in range(plan.kills):
        deadline = time.monotonic() + plan.interval_s * rng.uniform(0.5, 1.5)
        while time.monotonic() < deadline:
            await sessions.refresh()
            while sessions.in_flight < plan.in_flight and len(sessions.started) < plan.max_sessions:
                await sessions.start_one()
            await asyncio.sleep(0.5)
        slot = rng.choice(plan.targets)
        name = procs.current[slot].name
        at = procs.kill(slot)
        if SLOTS[slot] == "brain":
            brain_kills.append((at, name))
        await asyncio.sleep(plan.restart_delay_s)
        procs.start(slot, new_name=plan.new_names)
        say(f"chaos: kill {k + 1}/{plan.kills}: {name} (sessions started {len(sessions.started)},"
            f" in flight {sessions.in_flight})")
    return brain_kills


async def _drain(plan: Plan, sessions: Sessions, say) -> None:
    deadline = time.monotonic() + plan.drain_s
    await sessions.refresh()
    while sessions.in_flight and time.monotonic() < deadline:
        await asyncio.sleep(1)
        await sessions.refresh()
    say(f"chaos: drained, {len(sessions.ended)} of {len(sessions.started)} sessions ended")


async def _logged_events(settings: CommonSettings, since: float, sids: set[str]) -> list[Event]:
    """The committed wakeline.events records of these sessions (the log itself, not the archive)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), group_id=None,
                                isolation_level="read_committed", enable_auto_commit=False)
    await consumer.start()
    try:
        parts = [TopicPartition(EVENTS, p) for p in range(settings.partitions)]
        consumer.assign(parts)
        starts = await consumer.offsets_for_times({tp: int((since - 120) * 1000) for tp in parts})
        ends = await consumer.end_offsets(parts)
        for tp in parts:
            consumer.seek(tp, starts[tp].offset if starts[tp] else ends[tp])
        out: list[Event] = []
        idle = 0  # an open transaction holds the stable offset below the end: stop after 5 empty polls
        while idle < 5 and any([await consumer.position(tp) < ends[tp] for tp in parts]):
            batch = await consumer.getmany(timeout_ms=1000)
            idle = 0 if batch else idle + 1
            for records in batch.values():
                out.extend(parse_event(r.value) for r in records if r.key and r.key.decode() in sids)
        return out
    finally:
        await consumer.stop()


async def _stored_events(settings: CommonSettings, sids: list[str]) -> dict[str, list[Event]]:
    conn = await asyncpg.connect(settings.postgres_dsn)
    try:
        async with conn.transaction():
            await conn.execute("SELECT set_config('wakeline.tenant', 'default', true)")
            rows = await conn.fetch(f"SELECT {SELECT_LIST} FROM events WHERE session_id = ANY($1)"
                                    " ORDER BY session_id, seq", sids)
    finally:
        await conn.close()
    out: dict[str, list[Event]] = {}
    for row in rows:
        out.setdefault(row["session_id"], []).append(event_from_row(row))
    return out


def _runs(run_dir: Path, sid: str) -> list[str]:
    path = session_dir(run_dir / "sandboxes", "default", sid) / "work" / "runs.txt"
    return path.read_text().split() if path.exists() else []


def _brain_logs(run_dir: Path) -> dict[str, list[str]]:
    """Each brain incarnation's log lines, by its name (`brain-1.3`)."""
    return {log.name.removesuffix(".log"): log.read_text(errors="replace").splitlines()
            for log in sorted((run_dir / "logs").glob("brain-*.log"))}


def new_run_dir(root: Path) -> Path:
    path = root / f"chaos-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
    path.mkdir(parents=True)
    return path
