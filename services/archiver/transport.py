"""faust's aiokafka transport with the two changes the archiver needs.

1. Read committed. The brain writes `wakeline.events` in Kafka transactions; reading
   uncommitted would archive events of aborted transactions. faust only reads committed
   under `processing_guarantee="exactly_once"`, which also turns its producer into one
   transaction per partition; we want the reading half alone.
2. Postgres positions. faust seeks each assigned partition to the group's committed
   Kafka offset; the offsets stored with the archive are the truth, so we then seek to
   those (a partition the archive has never seen starts at the beginning). Kafka's
   commits trail ours and only serve tooling.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from faust.transport.drivers import aiokafka as driver
from faust.types import TP

log = logging.getLogger(__name__)
StoredPositions = Callable[[], Awaitable[dict[tuple[str, int], int]]]


class _ReadCommittedThread(driver.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # The consumer is built, not started: the fetcher takes this value at start().
        if getattr(consumer, "_isolation_level", None) not in ("read_uncommitted", "read_committed"):
            raise RuntimeError("aiokafka's consumer no longer exposes _isolation_level; "
                               "the archiver cannot make faust read committed")
        consumer._isolation_level = "read_committed"
        return consumer


class ArchiverConsumer(driver.Consumer):
    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return _ReadCommittedThread(self, loop=self.loop, beacon=self.beacon)

    async def seek_to_committed(self) -> Mapping[TP, int]:
        committed = await super().seek_to_committed()
        stored = await self.transport.stored_positions()  # type: ignore[attr-defined]
        positions = {tp: stored.get((tp.topic, tp.partition), 0) for tp in self.assignment()}
        moved = {tp: at for tp, at in positions.items() if committed.get(tp) != at}
        if moved:
            await self.seek_wait(moved)
        log.info("resuming from the archive's offsets %s (Kafka had %s)",
                 _show(positions), _show({tp: committed.get(tp) for tp in moved}))
        return positions


class ArchiverTransport(driver.Transport):
    Consumer = ArchiverConsumer

    def __init__(self, url: Any, app: Any, *, stored_positions: StoredPositions):
        super().__init__(url, app)
        self.stored_positions = stored_positions


def _show(positions: Mapping[TP, int | None]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]={at}" for tp, at in sorted(positions.items())) or "none"
