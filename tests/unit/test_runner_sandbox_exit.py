"""The runner wakes on its own wrapper's exit (a pidfd), and leaves no descriptor behind."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from wakeline_runner.call_lock import _exit_of

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd_open on this platform")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_the_future_is_done_when_the_child_exits_and_its_pidfd_is_closed() -> None:
    before = _open_fds()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    exited = _exit_of(child.pid)
    assert exited is not None and not exited.done()
    await asyncio.wait_for(exited, 10)
    assert child.poll() == 0
    await asyncio.sleep(0)  # the done callback that closes the pidfd runs on the next turn
    assert _open_fds() == before


async def test_a_watch_given_up_early_closes_its_pidfd_and_the_child_runs_on() -> None:
    before = _open_fds()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        exited = _exit_of(child.pid)
        assert exited is not None
        exited.cancel()
        await asyncio.sleep(0)
        assert _open_fds() == before
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


async def test_nothing_to_watch_without_a_process_of_ours() -> None:
    assert _exit_of(None) is None
