"""The floor under the tool round trip: a bare transactional ping-pong, no Wakeline logic.

The same two hops a tool call makes, with the same clients: the brain's side is a
transactional producer built by the brain's own `partition_producer` (group-committed per
partition, as `PartitionWriter` does) and a read-committed consumer from `make_consumer`;
the runner's side, in its own process as the runner is, is `make_consumer` and
`make_producer` answering each ping with a pong acked by all replicas. A round trip runs
from the ping's enqueue (where the brain stamps a `tool_call`) to the pong's receipt
(where it would sequence the `tool_result`). Only the topics are the bench's own.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections import defaultdict

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from bench import step_cost
from bench.harness import summary
from wakeline.transport.kafka_io import make_admin, make_consumer
from wakeline.transport.topic_admin import topic_settings
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import partition_for, record_key
from wakeline_brain.app import partition_producer
from wakeline_brain.settings import BrainSettings
from wakeline_runner.app import result_producer
from wakeline_runner.settings import RunnerSettings

PING = "wakeline-bench.floor-ping"
PONG = "wakeline-bench.floor-pong"
READY = "ready"


async def ensure_floor_topics(settings: CommonSettings) -> None:
    admin = make_admin(settings)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [NewTopic(t, settings.partitions, settings.replication_factor, topic_configs=topic_settings(settings))
                   for t in (PING, PONG) if t not in existing]
        if missing:
            try:
                await admin.create_topics(missing)
            except TopicAlreadyExistsError:
                pass
    finally:
        await admin.close()


async def _at_end(consumer: AIOKafkaConsumer, topic: str, partitions: int) -> None:
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    await consumer.seek_to_end()
    for tp in consumer.assignment():
        await consumer.position(tp)  # resolve now, so nothing sent after READY is skipped


async def echo(settings: RunnerSettings) -> None:
    """The runner's side: every ping back as a pong, on the same key and partition."""
    consumer = make_consumer(settings, group_id=None)
    producer = result_producer(settings)
    await producer.start()
    await consumer.start()
    try:
        await _at_end(consumer, PING, settings.partitions)
        print(READY, flush=True)
        pending: set[asyncio.Task] = set()
        while True:
            for records in (await consumer.getmany(timeout_ms=200, max_records=100)).values():
                for r in records:
                    task = asyncio.create_task(producer.send_and_wait(PONG, r.value, key=r.key,
                                                                      partition=r.partition))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
    finally:
        await consumer.stop()
        await producer.stop()


class GroupCommitter:
    """One transactional producer per partition; whatever queued while one commit ran goes in the next."""

    def __init__(self, settings: BrainSettings):
        self._settings = settings
        self._queues: dict[int, asyncio.Queue[tuple[bytes, bytes]]] = defaultdict(asyncio.Queue)
        self._tasks: list[asyncio.Task] = []
        self._producers = [partition_producer(settings, p) for p in range(settings.partitions)]

    async def start(self) -> None:
        await asyncio.gather(*(p.start() for p in self._producers))
        self._tasks = [asyncio.create_task(self._loop(p)) for p in range(self._settings.partitions)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(p.stop() for p in self._producers), return_exceptions=True)

    def send(self, partition: int, key: bytes, value: bytes) -> None:
        self._queues[partition].put_nowait((key, value))

    async def _loop(self, partition: int) -> None:
        queue, producer = self._queues[partition], self._producers[partition]
        while True:
            batch = [await queue.get()]
            while not queue.empty():
                batch.append(queue.get_nowait())
            async with producer.transaction():
                for key, value in batch:
                    await producer.send(PING, value, key=key, partition=partition)


async def ping_pong(settings: BrainSettings, sessions: int, rounds: int) -> list[float]:
    """`sessions` concurrent ping-pong chains of `rounds` each; the round trips in ms."""
    consumer = make_consumer(settings, group_id=None)
    await consumer.start()
    committer = GroupCommitter(settings)
    waiting: dict[str, asyncio.Future] = {}
    try:
        await _at_end(consumer, PONG, settings.partitions)
        await committer.start()
        receiver = asyncio.create_task(_receive(consumer, waiting))
        try:
            per_session = await asyncio.gather(*(_chain(committer, waiting, settings.partitions, rounds)
                                                 for _ in range(sessions)))
        finally:
            receiver.cancel()
            await asyncio.gather(receiver, return_exceptions=True)
    finally:
        await committer.stop()
        await consumer.stop()
    return [ms for chain in per_session for ms in chain]


async def _receive(consumer: AIOKafkaConsumer, waiting: dict[str, asyncio.Future]) -> None:
    while True:
        for records in (await consumer.getmany(timeout_ms=200, max_records=500)).values():
            for r in records:
                done = waiting.pop(json.loads(r.value)["ping"], None)
                if done is not None and not done.done():
                    done.set_result(time.perf_counter())


async def _chain(committer: GroupCommitter, waiting: dict[str, asyncio.Future], partitions: int,
                 rounds: int) -> list[float]:
    session_id = str(uuid.uuid4())
    partition = partition_for(session_id, partitions)
    out = []
    for _ in range(rounds):
        ping = uuid.uuid4().hex
        answered = asyncio.get_running_loop().create_future()
        waiting[ping] = answered
        began = time.perf_counter()
        committer.send(partition, record_key(session_id), json.dumps({"ping": ping}).encode())
        out.append((await asyncio.wait_for(answered, timeout=60) - began) * 1000)
    return out


class EchoProcess:
    """The runner's side as a separate process, as the runner is."""

    async def __aenter__(self) -> "EchoProcess":
        self.proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bench.floors", "echo",
                                                         stdout=asyncio.subprocess.PIPE)
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout=60)
        if line.decode().strip() != READY:
            raise RuntimeError(f"the floor's echo process did not start: {line!r}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.proc.terminate()
        await self.proc.wait()


async def run(sessions: int = 3, rounds: int = 20) -> dict:
    # admin: the floor's private topics and transactional ids are no service principal's.
    settings = BrainSettings(group_id=f"wakeline-bench-floor-{uuid.uuid4().hex[:8]}", kafka_username="admin")
    await ensure_floor_topics(settings)
    async with EchoProcess():
        await ping_pong(settings, sessions, 2)  # warm-up: connections, coordinators, metadata
        async with step_cost.window(step_cost.FLOOR_PATH, postgres=False) as measured:
            millis = await ping_pong(settings, sessions, rounds)
    return {"bench": "tool_round_trip_floor_ms", "concurrent_sessions": sessions, **summary(millis),
            "cost": measured.figures(len(millis))}


if __name__ == "__main__":
    if sys.argv[1:] == ["echo"]:
        asyncio.run(echo(RunnerSettings(kafka_username="admin")))
    else:
        print(json.dumps(asyncio.run(run())))
