"""Frames off an open event stream, and a stream that comes back by itself after a drop.

`frames_forever` reconnects after anything transient (no answer, a connection cut, 429, 5xx)
with the client's backoff, starting over from the first attempt once a frame has arrived;
it gives up only on an answer that will not change by trying again (401, 403, 404, ...).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx

from wakeline_client.errors import ConnectionFailed, QuotaExceeded, ServerError, Unavailable
from wakeline_client.operations import Operation
from wakeline_client.sse import Frame, FrameParser
from wakeline_client._async.http import AsyncHttp

log = logging.getLogger("wakeline_client")
TRANSIENT = (httpx.TransportError, httpx.StreamError, ConnectionFailed, Unavailable, QuotaExceeded, ServerError)


async def read_frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """Every frame, comments (heartbeats) included."""
    parser = FrameParser()
    async for line in response.aiter_lines():
        frame = parser.feed(line)
        if frame is not None:
            yield frame


async def frames_forever(http: AsyncHttp, op: Operation, path: Mapping[str, Any] | None = None,
                         query: Mapping[str, Any] | None = None,
                         stopping: Callable[[], bool] = lambda: False) -> AsyncIterator[Frame]:
    attempt = 0
    while not stopping():
        try:
            async with http.stream(op, path, query) as response:
                async for frame in read_frames(response):
                    attempt = 0
                    yield frame
                    if stopping():
                        return
        except TRANSIENT as err:
            log.warning("%s %s dropped (%s: %s); reconnecting", op.method, op.path, type(err).__name__, err)
        await asyncio.sleep(http.retry.delay(attempt))
        attempt += 1
