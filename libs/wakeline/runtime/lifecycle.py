"""How every service process starts and stops: `serve(run, settings)`.

Each service is one `async def run(settings, stop: asyncio.Event)`; `serve` sets `stop`
on SIGTERM or SIGINT so the service can finish its batch, commit and close its clients.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Awaitable, Callable, TypeVar

from wakeline.runtime import logs, tracing
from wakeline.runtime.metrics import serve_metrics
from wakeline.runtime.settings import CommonSettings

S = TypeVar("S")


def serve(run: Callable[[S, asyncio.Event], Awaitable[None]], settings: S, name: str) -> None:
    if isinstance(settings, CommonSettings):
        logs.configure(name, settings.log_format)
        serve_metrics(settings, name)
        tracing.configure(name, settings)
    else:
        logs.configure(name)
    with asyncio.Runner(loop_factory=loop_factory(settings)) as runner:
        runner.run(_main(run, settings))


def loop_factory(settings: object) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop unless the settings ask for the standard library's (None: asyncio's default)."""
    if getattr(settings, "event_loop", "asyncio") != "uvloop":
        return None
    import uvloop  # a dependency; imported here so that choosing asyncio never needs it

    return uvloop.new_event_loop


async def _main(run: Callable[[S, asyncio.Event], Awaitable[None]], settings: S) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await run(settings, stop)
