"""`BatchGate`: how a projection failure stops the archiver, and how a stop lets a batch finish.

Every batch passes through the gate. Weather (a database or broker restart, see
`weather.py`) is ridden out: the same batch is retried with backoff until it goes
through or the gate closes. Data failures never reach the gate from the events
archiver, which quarantines per session; anything that still raises here is a bug or
a broken deployment, and the first one closes the gate: the failure is logged once,
loudly, and kept for `app.run` to re-raise. Once the gate is closed
(failure or shutdown) no new batch starts; a batch parked in the gate stays there until
the app stops and cancels it (`stream.Batches.cancel`). Its Kafka offsets are never
committed, nothing of it is committed anywhere, and its topic's pipeline, and with it
the consumer's fetch loop, waits behind it, so nothing after it is stored either.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from wakeline_archiver.weather import ride_out

log = logging.getLogger(__name__)
T = TypeVar("T")


class BatchGate:
    def __init__(self) -> None:
        self.failure: BaseException | None = None
        self.closed = asyncio.Event()
        self._busy = 0
        self._quiet = asyncio.Event()
        self._quiet.set()

    async def pass_batch(self, handle: Callable[[T], Awaitable[None]], batch: T) -> None:
        """Runs `handle(batch)`; returns only if it succeeded while the gate was open."""
        if not self.closed.is_set():
            self._busy += 1
            self._quiet.clear()
            try:
                if await ride_out(lambda: handle(batch), "archiving a batch", self.closed):
                    return
            except Exception as exc:  # noqa: BLE001 - every failure that is not weather stops the service
                self._fail(exc)
            finally:
                self._busy -= 1
                if not self._busy:
                    self._quiet.set()
        await asyncio.Future()  # parked until the app stops and cancels the batch

    def close(self) -> None:
        self.closed.set()

    async def drained(self) -> None:
        """Waits for the batches in flight to finish (they were let in before close)."""
        await self._quiet.wait()

    def fail(self, exc: BaseException) -> None:
        """Stops the service from outside a batch (the stall watchdog)."""
        self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
            log.critical("projection failed; stopping the archiver: %s", exc, exc_info=exc)
        self.close()
