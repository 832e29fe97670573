"""Tail reads: what a wake's read of the un-archived Kafka tail leaves behind, and what a
tail of nothing but an aborted transaction costs (issue 10's stalls; the tests in
tests/integration/test_brain_tail_reads.py hold the behaviour, this the figures).

On a private topic, with the brain's `tail_consumer` and `TailReader._read_keys`, side
by side in each round:

- `tail_lookup_ms`: the `end_offsets` look-up right after a tail read (the next wake's
  first request on the same connection), against its floor, a look-up right after a
  look-up. A fetch left in flight by the read would add up to `fetch_wait_ms` to it.
- `aborted_tail_read_ms`: reading a tail that holds only an aborted record and its marker
  (a brain fenced mid-transaction), against its floor, reading a tail of one committed
  event. The fetch hands back no record, so the read ends on its next look at the
  position, one `poll_ms` later.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

from aiokafka.admin import NewTopic
from aiokafka.structs import TopicPartition

from bench.harness import summary
from tests.factories import LIVE, draft, sealed
from wakeline.contract.codec import encode
from wakeline.transport.kafka_io import RANGE_FETCH_WAIT_MS, RANGE_POLL_MS, make_admin, make_producer
from wakeline.runtime.settings import CommonSettings
from wakeline_brain.tail_reads import TailReader, tail_consumer

COMMITTED, ABORTED = 0, 1  # the private topic's partitions: a committed tail, an aborted one


async def _ms(step: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await step()
    return (time.perf_counter() - started) * 1000


async def _seed(producer, tail, topic: str, sid: str) -> int:
    """One committed event on each partition, then an aborted one on `ABORTED`: returns
    where that partition's aborted tail starts."""
    created, message = sealed([draft("session_created", f"c-{sid}", config={}, owner="user:bench"),
                               draft("user_message", f"m-{sid}", text="hello")], sid, stamps=LIVE)
    async with producer.transaction():
        for partition in (COMMITTED, ABORTED):
            await producer.send(topic, encode(created), key=sid.encode(), partition=partition)
    aborted = TopicPartition(topic, ABORTED)
    committed_end = (await tail.end_offsets([aborted]))[aborted]
    await producer.begin_transaction()
    await producer.send(topic, encode(message), key=sid.encode(), partition=ABORTED)
    await producer.abort_transaction()
    return committed_end


async def run(repeats: int = 30) -> list[dict]:
    settings = CommonSettings()
    topic = f"bench-tail-{uuid.uuid4().hex[:12]}"
    admin = make_admin(settings)
    await admin.start()
    await admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    producer = make_producer(settings, transactional_id=f"bench-tail-{uuid.uuid4().hex}")
    tail = tail_consumer(settings)
    await producer.start()
    await tail.start()
    try:
        sid = f"bench-tail-{uuid.uuid4().hex[:12]}"
        aborted_from = await _seed(producer, tail, topic, sid)
        loader = TailReader(tail, topic=topic)
        tp, keys = TopicPartition(topic, COMMITTED), {sid.encode()}
        times: dict[str, list[float]] = {"lookup": [], "lookup_floor": [], "aborted": [], "committed": []}
        for _ in range(repeats):  # alternated: each figure and its floor once per round
            await tail.end_offsets([tp])
            times["lookup_floor"].append(await _ms(lambda: tail.end_offsets([tp])))
            times["committed"].append(await _ms(lambda: loader._read_keys(COMMITTED, 0, keys)))
            times["lookup"].append(await _ms(lambda: tail.end_offsets([tp])))
            times["aborted"].append(await _ms(lambda: loader._read_keys(ABORTED, aborted_from, keys)))
    finally:
        await tail.stop()
        await producer.stop()
        await admin.delete_topics([topic])
        await admin.close()
    return _lines(times)


def _lines(times: dict[str, list[float]]) -> list[dict]:
    def beside(figure: str, floor: str) -> dict:
        p50, floor_p50 = statistics.median(times[figure]), statistics.median(times[floor])
        return {**summary(times[figure]), "floor_p50": round(floor_p50, 3),
                "over_floor_ms": round(p50 - floor_p50, 3)}
    return [{"bench": "tail_lookup_ms", **beside("lookup", "lookup_floor"), "fetch_wait_ms": RANGE_FETCH_WAIT_MS},
            {"bench": "aborted_tail_read_ms", **beside("aborted", "committed"), "poll_ms": RANGE_POLL_MS}]


if __name__ == "__main__":
    for line in asyncio.run(run()):
        print(json.dumps(line))
