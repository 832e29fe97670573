"""The gateway's events feed: one read-committed consumer of `wakeline.events` per process.

No consumer group: it is assigned every partition and starts at the end when the gateway
starts. It needs no history (Postgres has it) and commits nothing; it only tells this
process's listeners (`listeners.py`) about events as the brain commits them, so a command
learns its outcome and a live stream its next frame in milliseconds rather than after the
archiver's batch and a poll. Postgres stays the fallback: whoever waits on the feed also
checks Postgres, so a feed that stops or misses an event delays an answer, never loses it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from wakeline.contract.codec import MalformedRecord, decode
from wakeline.contract.events import parse_event
from wakeline.transport.kafka_io import make_consumer
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.deltas import ModelDelta
from wakeline.contract.topics import DELTAS, EVENTS
from wakeline_gateway.listeners import Listeners

log = logging.getLogger(__name__)
RESTART_S = 1.0


@dataclass(frozen=True)
class FeedState:
    """What requests see of the feed: its listeners, and whether it is running (`None`:
    switched off by `WAKELINE_EVENTS_FEED=false`, so every wait polls Postgres)."""

    listeners: Listeners
    feed: EventsFeed | None = None
    deltas: DeltasFeed | None = None

    def running(self) -> bool:
        return self.feed is not None and self.feed.running


def feed_consumer(settings: CommonSettings) -> AIOKafkaConsumer:
    # fetch_max_wait_ms only bounds an empty long poll; a committed record answers it at once.
    return make_consumer(settings, group_id=None, auto_offset_reset="latest", fetch_max_wait_ms=200)


class EventsFeed:
    """`async with EventsFeed(...)`: positioned at the end of every partition before it returns."""

    topic = EVENTS

    def __init__(self, consumer: AIOKafkaConsumer, partitions: int, listeners: Listeners):
        self._consumer, self._partitions, self.listeners = consumer, partitions, listeners
        self._task: asyncio.Task[None] | None = None
        self._healthy = False

    @property
    def running(self) -> bool:
        """Whether waiting on the feed is worth it; when not, listeners poll Postgres instead."""
        return self._healthy and self._task is not None and not self._task.done()

    async def __aenter__(self) -> EventsFeed:
        await self._consumer.start()
        parts = [TopicPartition(self.topic, p) for p in range(self._partitions)]
        self._consumer.assign(parts)
        await self._consumer.seek_to_end(*parts)
        for tp in parts:  # resolve the lazy seek now, so nothing committed after start is missed
            await self._consumer.position(tp)
        self._healthy = True
        self._task = asyncio.create_task(self._run(), name="events-feed")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._healthy = False
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._consumer.stop()

    async def _run(self) -> None:
        while True:
            try:
                batches = await self._consumer.getmany(timeout_ms=1000)
                self._healthy = True
                for records in batches.values():
                    for record in records:
                        if self._wanted(record.key):
                            self._deliver(record.value, record.partition, record.offset)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the fallback covers the gap; say so and try again
                log.exception("%s feed: failed; answers fall back to Postgres until it recovers", self.topic)
                self._healthy = False
                await asyncio.sleep(RESTART_S)

    def _wanted(self, key: bytes | None) -> bool:
        """Records are keyed by session id (`topics.record_key`): one nobody here listens to is
        not decoded at all. A record without a key is decoded and judged by what it names."""
        return key is None or self.listeners.watches(key.decode("utf-8", "replace"))

    def _deliver(self, value: bytes | None, partition: int, offset: int) -> None:
        try:
            event = decode(value, parse_event)
        except MalformedRecord as err:
            # The archiver dead-letters it; here it only cannot wake anyone up.
            log.warning("events feed: %s[%d]@%d is not an event (%s); skipped", EVENTS, partition, offset,
                        err.reason)
            return
        self.listeners.deliver(event)


class DeltasFeed(EventsFeed):
    """The model-deltas topic's feed: the text of replies being written, for live streams
    that asked for it. Nothing falls back to it and nothing is lost without it: the
    `model_turn` event carries the whole reply."""

    topic = DELTAS

    def _wanted(self, key: bytes | None) -> bool:
        return key is None or self.listeners.watches_deltas(key.decode("utf-8", "replace"))

    def _deliver(self, value: bytes | None, partition: int, offset: int) -> None:
        try:
            delta = decode(value, ModelDelta.model_validate_json)
        except MalformedRecord as err:
            log.warning("deltas feed: %s[%d]@%d is not a delta (%s); skipped", DELTAS, partition, offset, err.reason)
            return
        self.listeners.deliver_delta(delta)
