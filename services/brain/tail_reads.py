"""Reading the un-archived tail of sessions from `wakeline.events`, read committed.

A wake (`wake.SessionLoader`) reads the archive up to an offset from the store, then the
session's records from that offset to the partition's end from Kafka: this module. Tails
are read one at a time on one shared consumer, and one read serves every wake of the same
partition that queued behind it: when 500 sessions start at once, the partition's tail is
read a few times, not 500 times one after another (issue 10).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from wakeline.contract.events import Event, parse_event
from wakeline.contract.topics import EVENTS
from wakeline.runtime.settings import CommonSettings
from wakeline.transport.kafka_io import RANGE_FETCH_WAIT_MS, RANGE_POLL_MS, kafka_auth


class WakeIncomplete(RuntimeError):
    """The tail read did not reach the end offsets taken at its start within the deadline."""


def tail_consumer(settings: CommonSettings, fetch_max_wait_ms: int = RANGE_FETCH_WAIT_MS) -> AIOKafkaConsumer:
    """The consumer a `TailReader` reads with; its owner starts and stops it."""
    # "none": an archive offset Kafka no longer has means events were lost before
    # they were archived; that must fail loudly, never silently start elsewhere.
    return AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), group_id=None,
                            enable_auto_commit=False, isolation_level="read_committed",
                            fetch_max_wait_ms=fetch_max_wait_ms, auto_offset_reset="none")


@dataclass
class _TailRequest:
    key: bytes
    start: int
    found: asyncio.Future[list[Event]] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class TailReader:
    """`tail` is a started `tail_consumer`; `topic` the events topic (tests read private ones)."""

    def __init__(self, tail: AIOKafkaConsumer, tail_deadline_s: float = 30.0, topic: str = EVENTS):
        self._topic = topic
        self._tail = tail
        self._tail_deadline_s = tail_deadline_s
        self._lock = asyncio.Lock()
        self._queued: dict[int, list[_TailRequest]] = {}

    async def read(self, session_id: str, partition: int, start: int) -> list[Event]:
        """The session's committed events in events p from `start` on (and perhaps some
        before it, which `load` drops by seq), read to the end as it was once we asked."""
        request = _TailRequest(session_id.encode(), start)
        self._queued.setdefault(partition, []).append(request)
        async with self._lock:  # one shared consumer, one reader at a time
            if not request.found.done():  # else a read that began after we queued served us
                batch = self._queued.pop(partition)
                others = [r for r in batch if r is not request]
                try:
                    found = await self._read_keys(partition, min(r.start for r in batch), {r.key for r in batch})
                except asyncio.CancelledError:  # our actor stopped: the next reader serves the rest
                    self._queued.setdefault(partition, []).extend(others)
                    raise
                except Exception as exc:  # theirs too: each caller decides whether to retry
                    for r in others:
                        r.found.set_exception(exc)
                    raise
                for r in batch:
                    if not r.found.done():
                        r.found.set_result(found.get(r.key, []))
        return request.found.result()

    async def _read_keys(self, partition: int, start: int, keys: set[bytes]) -> dict[bytes, list[Event]]:
        """The events of `keys` in events p from `start` to the read-committed end as it is now."""
        tp = TopicPartition(self._topic, partition)
        found: dict[bytes, list[Event]] = {}
        self._tail.assign([tp])
        # Paused until we read: otherwise the background fetcher starts a long poll
        # of its own and the offset look-up below waits behind it.
        self._tail.pause(tp)
        # `wakeline.events` is written only in transactions, so the offset right
        # before the read-committed end is always a commit (or abort) marker. The
        # client never hands a marker back nor moves its position past one, so the
        # tail is read once the position reaches it.
        last = (await self._tail.end_offsets([tp]))[tp] - 1
        if start >= last:
            return found
        self._tail.seek(tp, start)
        self._tail.resume(tp)
        # Read in this task and pause before yielding to the loop again. Under `wait_for`
        # (a task of its own) the loop ran once between the last records and the pause,
        # and in that turn the fetcher sent its next fetch from the end: a long poll of up
        # to `fetch_max_wait_ms` that the broker answers before any later request on the
        # connection, so the next wake's `end_offsets` waited behind it (issue 10: 20–65 ms
        # on every second wake in `bench.wake_time`).
        try:
            async with asyncio.timeout(self._tail_deadline_s):
                await self._read_until(tp, last, keys, found)
        except TimeoutError:
            raise WakeIncomplete(f"{self._topic}[{partition}]: the tail read did not reach offset {last}"
                                 f" within {self._tail_deadline_s:g} s") from None
        finally:
            self._tail.pause(tp)
        return found

    async def _read_until(self, tp: TopicPartition, last: int, keys: set[bytes],
                          found: dict[bytes, list[Event]]) -> None:
        # An empty poll is not the end: after a fence or during a slow fetch the next
        # records may still be on their way. Only the position says we are done.
        while await self._tail.position(tp) < last:
            records = (await self._tail.getmany(tp, timeout_ms=RANGE_POLL_MS, max_records=5000)).get(tp, [])
            for r in records:
                if r.key in keys:
                    found.setdefault(r.key, []).append(parse_event(r.value))
