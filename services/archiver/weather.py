"""Weather: failures of the infrastructure, not of the data, and how a batch rides them out.

A database or broker restart, a dropped connection, a deadlock or a full connection
table says nothing about the records being archived: the batch is retried as it is,
with backoff, and nothing is quarantined for it. Everything else is a data failure,
handled per session by `archiver.EventArchiver`. `is_weather` (in `wakeline.runtime.weather`,
shared with the brain) decides; `ride_out` is the retry loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from wakeline.runtime.weather import is_weather

log = logging.getLogger(__name__)

FIRST_DELAY_S = 0.2
MAX_DELAY_S = 10.0


async def ride_out(attempt: Callable[[], Awaitable[None]], what: str, stopping: asyncio.Event) -> bool:
    """Runs `attempt` until it succeeds (True) or `stopping` is set while waiting (False).

    A data failure propagates at once. Weather is logged on the first failure and then
    at every doubling of the attempts, so an outage of minutes costs a dozen lines.
    """
    delay, failures, since = FIRST_DELAY_S, 0, time.monotonic()
    while True:
        try:
            await attempt()
        except Exception as exc:
            if not is_weather(exc):
                raise
            failures += 1
            if failures & (failures - 1) == 0:
                log.warning("%s: infrastructure unavailable (%s: %s); retry %d in %.1f s",
                            what, type(exc).__name__, exc, failures, delay)
            if await _set_within(stopping, delay):
                return False
            delay = min(MAX_DELAY_S, delay * 2)
            continue
        if failures:
            log.warning("%s: succeeded again after %d retries over %.1f s", what, failures, time.monotonic() - since)
        return True


async def _set_within(event: asyncio.Event, seconds: float) -> bool:
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        return False
    return True
