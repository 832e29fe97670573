"""What feeds the archiver's metrics (declared below): the size of each events batch
stored, the lag `_report_lag` measures, and the archiver's own counts of what it did with
each record, carried into counters every second. app.py puts it in place.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from prometheus_client import Counter, Gauge, Histogram

from wakeline.runtime import metrics

# This service's metrics (names, labels and buckets: docs/operations.md says what each means).
ARCHIVER_BATCH = Histogram("wakeline_archiver_batch_size", "Events records per archived batch",
                           buckets=(1, 5, 10, 50, 100, 500, 1000, 5000))
ARCHIVER_LAG = Gauge("wakeline_archiver_lag", "Committed events not yet in the archive, per partition of the "
                     "events topic", ["partition"])
ARCHIVER_EVENTS = Counter("wakeline_archiver_records_total", "Events records the archiver handled, by outcome",
                          ["outcome"])

T = TypeVar("T", bound=Sequence[Any])


def sized(store: Callable[[T], Awaitable[None]]) -> Callable[[T], Awaitable[None]]:
    """`store`, with the size of every batch it is handed observed."""
    async def measured(batch: T) -> None:
        ARCHIVER_BATCH.observe(len(batch))
        await store(batch)
    return measured


def record_lag(lag: dict[int, Any]) -> None:
    for partition, value in lag.items():
        ARCHIVER_LAG.labels(str(partition)).set(value["lag"])


def start_counting(events: Any) -> asyncio.Task[None]:
    """The EventArchiver's counts (archived, redelivered, rejected, parked) as counters."""
    carried = dict.fromkeys(("archived", "redelivered", "rejected", "parked"), 0)

    async def carry() -> None:
        for outcome, before in carried.items():
            now = getattr(events, outcome)
            if now > before:
                ARCHIVER_EVENTS.labels(outcome).inc(now - before)
                carried[outcome] = now
    return metrics.every(1.0, carry)
