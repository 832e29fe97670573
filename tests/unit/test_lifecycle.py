"""`lifecycle.serve` runs a service on the loop its settings name, and sets `stop` on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
import uvloop

from wakeline.runtime.lifecycle import serve
from wakeline.runtime.settings import CommonSettings


@pytest.mark.parametrize("choice, loop_type", [("uvloop", uvloop.Loop), ("asyncio", asyncio.BaseEventLoop)])
def test_a_service_runs_on_the_loop_its_settings_name_and_stops_on_sigterm(
        choice: str, loop_type: type, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("wakeline.runtime.lifecycle.logs.configure", lambda *_: None)
    monkeypatch.setattr("wakeline.runtime.lifecycle.serve_metrics", lambda *_: None)
    monkeypatch.setattr("wakeline.runtime.lifecycle.tracing.configure", lambda *_: None)
    seen: list[object] = []

    async def run(settings: CommonSettings, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        seen.append(loop)
        loop.call_later(0.05, os.kill, os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stop.wait(), 10)
        seen.append("stopped")

    serve(run, CommonSettings(event_loop=choice), "test")
    assert isinstance(seen[0], loop_type) and seen[1:] == ["stopped"]
    if choice == "asyncio":
        assert not isinstance(seen[0], uvloop.Loop)


def test_an_unknown_loop_is_refused_by_the_settings() -> None:
    with pytest.raises(ValueError, match="event_loop"):
        CommonSettings(event_loop="trio")  # type: ignore[arg-type]
