"""`OwnWrites`: which sessions a partition's writer has put on its events partition, and
from which offset on it has been the partition's only writer.

Why: a wake reads the archive, then the un-archived tail of the session's events partition
from Kafka (`tail_reads.TailReader`, one shared consumer, a partition at a time). When a
tenant creates sessions by the hundred, every one of those wakes queues for that reader, and
the tail grows as the archiver falls behind: in `bench.flood` a new session waited 0.7–1.3 s
for a tail that could not hold a single event of it, and another tenant's new sessions waited
behind them (issue 34). But a brain's writer of events p is p's only writer once its
producer has fenced the previous one (`writer.PartitionWriter`): every record at or after
the first offset it wrote is its own (a fenced writer's later records are aborted, invisible
to read-committed readers). So for a session whose key it never wrote, the tail from an
archive position at or after that offset holds nothing: the read is skipped (`untouched`).

Bounded: the keys are kept in generations of `generation_keys`; when the newest fills, a new
one starts and only the two newest are kept. Dropping the oldest moves the offset from which
the writer can answer up to the next generation's first: an archive that lags further than
that reads the tail as before. A send whose offset never comes (its transaction failed)
leaves the generation unable to answer; the writer is replaced then anyway.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Generation:
    keys: set[bytes] = field(default_factory=set)
    first_offset: int | None = None  # the offset of its first record, once the broker told us
    asked: bool = False  # the first record's offset is on its way


class OwnWrites:
    def __init__(self, generation_keys: int = 50_000):
        self._generation_keys = generation_keys
        self._generations: deque[_Generation] = deque([_Generation()])

    def sent(self, key: bytes, delivery: Any) -> None:
        """A record of session `key` sent to the partition; `delivery` is the producer's future
        of its metadata (anything else, e.g. a test's fake, is taken as no offset learned)."""
        newest = self._generations[-1]
        if len(newest.keys) >= self._generation_keys and key not in newest.keys:
            newest = _Generation()
            self._generations.append(newest)
            if len(self._generations) > 2:
                self._generations.popleft()
        newest.keys.add(key)
        if not newest.asked:
            newest.asked = True
            if isinstance(delivery, asyncio.Future):
                delivery.add_done_callback(lambda done, gen=newest: _learn_first(gen, done))

    def untouched(self, key: bytes, start: int) -> bool:
        """Whether the partition holds no record of `key` from offset `start` on: all of it
        from there was written by us, and none of it for `key`."""
        oldest = self._generations[0]
        if oldest.first_offset is None or start < oldest.first_offset:
            return False
        return all(key not in generation.keys for generation in self._generations)


def _learn_first(generation: _Generation, done: asyncio.Future[Any]) -> None:
    if done.cancelled() or done.exception() is not None:
        return
    offset = getattr(done.result(), "offset", None)
    if isinstance(offset, int):
        generation.first_offset = offset
