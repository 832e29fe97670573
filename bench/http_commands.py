"""Commands over HTTP: `POST /v1/sessions/{id}/messages` until `done`, and event → SSE frame.

Against the floor of one brain transaction measured in the same run: a `post_message`
produced straight to `wakeline.inbox` → its outcome read from `wakeline.events` by a bare
read-committed consumer (no HTTP, no gateway: the brain's transaction plus the two hops).
Two gateways run side by side, one answering from its events feed, one with
`WAKELINE_EVENTS_FEED=false` (the Postgres polling it had before); floor, feed and poll
take turns, a few samples each, round after round. Each sample goes to an idle session
(the bench waits for the turn the message started to end), one session per mode.
SSE: each gateway streams the same session, which only the "sse" turns move (messages put
straight on the inbox), so no frame competes with a command being timed; a frame's latency
is its arrival minus the event's `ts` (the brain's clock, when it sealed the event, just
before committing).
The brain and archiver must be running (`bench/__main__.py` starts them) with the bench
policies (`reply`).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from aiokafka.structs import TopicPartition

from bench.harness import summary
from tests.e2e.stack import Stack
from wakeline.contract.commands import PostMessage
from wakeline.contract.events import Event, SessionEnded, parse_event
from wakeline.transport.kafka_io import make_consumer, make_producer, send_keyed
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.quotas import ADMITTED_HEADER
from wakeline.contract.topics import EVENTS, INBOX
from wakeline_gateway.idempotency import session_id_for

MODES = ("floor", "feed", "poll", "read", "create:feed", "create:poll", "sse")
LONG_LIVED = ("floor", "feed", "poll", "read", "sse")  # the modes that reuse one session
# The gateway's inbox producer settings (app.py), so the floor's produce hop is the same hop.
PRODUCER = {"linger_ms": 0}


class Committed:
    """A bare group-less read-committed consumer of every events partition, from the end."""

    def __init__(self, settings: CommonSettings):
        self._consumer = make_consumer(settings, group_id=None, auto_offset_reset="latest", fetch_max_wait_ms=200)
        self._partitions = settings.partitions
        self._waiting: dict[str, tuple[Callable[[Event], bool], asyncio.Future[Event]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Committed:
        await self._consumer.start()
        parts = [TopicPartition(EVENTS, p) for p in range(self._partitions)]
        self._consumer.assign(parts)
        await self._consumer.seek_to_end(*parts)
        for tp in parts:
            await self._consumer.position(tp)
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._consumer.stop()

    async def _run(self) -> None:
        while True:
            for records in (await self._consumer.getmany(timeout_ms=1000)).values():
                for record in records:
                    event = parse_event(record.value)
                    for name, (matches, found) in list(self._waiting.items()):
                        if not found.done() and matches(event):
                            found.set_result(event)
                            del self._waiting[name]

    def expect(self, matches: Callable[[Event], bool]) -> asyncio.Future[Event]:
        found: asyncio.Future[Event] = asyncio.get_running_loop().create_future()
        self._waiting[str(uuid.uuid4())] = (matches, found)
        return found


def turn_over(session_id: str, after_seq: int) -> Callable[[Event], bool]:
    return lambda e: e.session_id == session_id and e.seq > after_seq and isinstance(e, SessionEnded)


class Frames:
    """An SSE stream held open on one session: arrival time of each frame, by seq."""

    def __init__(self, client: httpx.AsyncClient, session_id: str):
        self.arrived: dict[int, tuple[float, str]] = {}
        self._task = asyncio.create_task(self._read(client, session_id))

    async def _read(self, client: httpx.AsyncClient, session_id: str) -> None:
        async with client.stream("GET", f"/v1/sessions/{session_id}/stream", timeout=None) as response:
            response.raise_for_status()
            seq = None
            async for line in response.aiter_lines():
                if line.startswith("id: "):
                    seq = int(line[4:])
                elif line.startswith("data: ") and seq is not None:
                    self.arrived[seq] = (time.time(), line[6:])

    def latencies_ms(self, since: float) -> list[float]:
        lags = []
        for arrived, data in self.arrived.values():
            event = parse_event(data)
            if event.ts.timestamp() >= since:
                lags.append((arrived - event.ts.timestamp()) * 1000)
        return lags

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def create_session(client: httpx.AsyncClient) -> str:
    answer = await client.post("/v1/sessions", json={"message": "bench", "config": {"model": "scripted:reply",
                                                                                       "max_turns": 10_000}})
    assert answer.status_code in (201, 202), answer.text  # 202: a brain that is still joining its group
    sid = answer.json()["session_id"]
    for _ in range(600):  # setup only: its first turn may be over before anything could listen for it
        found = await client.get(f"/v1/sessions/{sid}")
        if found.status_code == 200 and found.json()["status"] == "ended":
            return sid
        await asyncio.sleep(0.1)
    raise RuntimeError(f"session {sid} did not end its first turn; are the brain and archiver running?")


async def sample(mode: str, sid: str, after_seq: int, clients: dict[str, httpx.AsyncClient],
                 committed: Committed, send: Callable[[PostMessage], Awaitable[object]]) -> tuple[float, int]:
    """One message to an idle session at `after_seq`: (ms until its outcome, the seq its turn
    ended at); returns once the turn is over, so the next sample finds the session idle.
    `read` is the decomposition: the same client's `GET /v1/sessions/{id}` (HTTP, the key
    and the session read that every command pays before it is sent)."""
    if mode == "read":
        started = time.perf_counter()
        answer = await clients["feed"].get(f"/v1/sessions/{sid}")
        assert answer.status_code == 200, answer.text
        return (time.perf_counter() - started) * 1000, after_seq
    if mode.startswith("create:"):  # a new session each time, its id fixed by the key beforehand
        key = str(uuid.uuid4())
        sid, after_seq = session_id_for("default", "user:bench", key), 0
    ended = committed.expect(turn_over(sid, after_seq))  # before sending: the turn may end first
    if mode.startswith("create:"):
        started = time.perf_counter()
        answer = await clients[mode.split(":")[1]].post("/v1/sessions", headers={"Idempotency-Key": key}, json={
            "message": "ping", "config": {"model": "scripted:reply"}})
        assert answer.status_code == 201 and answer.json()["session_id"] == sid, answer.text
    elif mode in ("floor", "sse"):
        command = PostMessage(command_id=str(uuid.uuid4()), session_id=sid, actor="user:bench", text="ping")
        outcome = committed.expect(lambda e: e.causation_id == command.command_id)
        started = time.perf_counter()
        await send(command)
        await asyncio.wait_for(outcome, 30)
    else:
        started = time.perf_counter()
        answer = await clients[mode].post(f"/v1/sessions/{sid}/messages", json={"text": "ping"})
        assert answer.status_code == 202 and answer.json()["status"] == "done", answer.text
    took = time.perf_counter() - started
    return took * 1000, (await asyncio.wait_for(ended, 30)).seq


async def measure(clients: dict[str, httpx.AsyncClient], rounds: int, per_round: int) -> list[dict]:
    settings = CommonSettings()
    producer = make_producer(settings, **PRODUCER)
    await producer.start()
    try:
        async with Committed(settings) as committed:
            sessions = {mode: await create_session(clients["feed"]) for mode in LONG_LIVED}
            at = {mode: (await clients["feed"].get(f"/v1/sessions/{sid}")).json()["last_seq"]
                  for mode, sid in sessions.items()}
            # Both gateways stream one session of its own, whose events come only in the
            # "sse" turns, so frames never compete with a command being timed.
            streams = {mode: Frames(clients[mode], sessions["sse"]) for mode in ("feed", "poll")}
            await asyncio.sleep(0.5)  # the streams have replayed their (short) history
            since = time.time()
            # Marked admitted, as the gateway marks what it sends: the floor is the brain's work on
            # the gateway's records, which it does not count against the quotas again.
            send = lambda c: send_keyed(producer, INBOX, c.session_id, c, settings.partitions,  # noqa: E731
                                        ((ADMITTED_HEADER, b"bench"),))
            took: dict[str, list[float]] = {mode: [] for mode in MODES}
            for _ in range(rounds):
                for mode in MODES:
                    for _ in range(per_round):
                        sid = sessions.get(mode, "")
                        ms, at[mode] = await sample(mode, sid, at.get(mode, 0), clients, committed, send)
                        took[mode].append(ms)
            await asyncio.sleep(1.0)  # the polling stream's last frames
            for stream in streams.values():
                await stream.close()
    finally:
        await producer.stop()
    return lines(took, {mode: stream.latencies_ms(since) for mode, stream in streams.items()})


def lines(took: dict[str, list[float]], frames: dict[str, list[float]]) -> list[dict]:
    floor = summary(took["floor"])
    out: list[dict] = [{"bench": "http_commands_floor_ms", "what": "post_message on the inbox -> outcome on "
                        "wakeline.events (one brain transaction + two hops)", **floor}]
    for mode in ("feed", "poll"):
        figure = summary(took[mode])
        out.append({"bench": "http_message_done_ms", "gateway": mode, **figure, "floor_p50": floor["p50"],
                    "floor_p99": floor["p99"], "ratio_p50": round(figure["p50"] / floor["p50"], 2),
                    "ratio_p99": round(figure["p99"] / floor["p99"], 2)})
    out.append({"bench": "http_read_ms", "what": "GET /v1/sessions/{id}: HTTP, key and session read",
                **summary(took["read"])})
    for mode in ("feed", "poll"):
        out.append({"bench": "http_create_done_ms", "gateway": mode, "what": "POST /v1/sessions until done "
                    "(waits for the archived session row)", **summary(took[f"create:{mode}"])})
    for mode in ("feed", "poll"):
        out.append({"bench": "sse_frame_ms", "gateway": mode, "what": "event ts (brain) -> SSE frame received "
                    "(messages sent straight to the inbox, both gateways streaming the same session)",
                    **summary(frames[mode])})
    return out


async def run(rounds: int = 6, per_round: int = 10, run_dir: Path | None = None) -> list[dict]:
    """Starts the two gateways (feed on, feed off), measures, stops them."""
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="wakeline-bench-http-"))
    gateways = {"feed": Stack(run_dir), "poll": Stack(run_dir)}
    try:
        for mode, stack in gateways.items():
            stack.start(f"gateway-{mode}", kind="gateway", WAKELINE_EVENTS_FEED=str(mode == "feed").lower())
        for stack in gateways.values():
            stack.wait_gateway()
        key = gateways["feed"].api_key(principal="bench", role="user")
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=gateways["feed"].url, headers=headers, timeout=30) as feed, \
                httpx.AsyncClient(base_url=gateways["poll"].url, headers=headers, timeout=30) as poll:
            return await measure({"feed": feed, "poll": poll}, rounds, per_round)
    finally:
        for stack in gateways.values():
            stack.stop_all()


if __name__ == "__main__":
    for line in asyncio.run(run()):
        print(json.dumps(line))
