"""A bash call's lock as the runner sees it: waited for until no supervisor holds it, and
its holder killed once the call is past its deadline.

The supervisor (`wrapper.py`) holds `<id>.lock` for as long as it lives and writes its pid,
which is also its process group's, into it; so any runner, the one that launched the call
or one that adopted it after a crash, can tell whether the call still runs and stop it.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import time
from pathlib import Path

from wakeline_runner.records import CallFiles, read_json

# How long past its deadline a wrapper may take to record its own timeout before we kill it.
GRACE_S = 5.0


async def wait_until_released(files: CallFiles, pid: int | None) -> bool:
    """Waits until no wrapper holds the call's lock; True if we had to kill it.

    Polled with backoff (10 ms doubling to 200 ms), and, for a wrapper this runner
    launched, woken as soon as it exits: polling alone noticed a 0.2 s call about
    80 ms late, and a 10 ms one 40 ms late. An adopted call's wrapper has no pid
    here, so only the polling sees it end.
    """
    delay, killed_at = 0.01, None
    exited = _exit_of(pid)
    try:
        while not _lock_free(files.lock):
            started = read_json(files.started) or {}
            now = time.monotonic()
            if killed_at is None and now > started.get("deadline_monotonic", now + 1) + GRACE_S:
                killed_at = now
                _kill_holder(files.lock)
            elif killed_at is not None and now > killed_at + GRACE_S:
                break  # unkillable holder: report what we have rather than wait forever
            if exited is not None and not exited.done():
                await asyncio.wait([exited], timeout=delay)
            else:  # no exit to watch, or it came and something else still holds the lock
                await asyncio.sleep(delay)
            delay = min(delay * 2, 0.2)
    finally:
        if exited is not None:
            exited.cancel()  # its callback closes the pidfd
    return killed_at is not None


def _exit_of(pid: int | None) -> asyncio.Future[None] | None:
    """A future done when the supervisor `pid` exits (a pidfd the event loop watches), or
    None where the platform has no pidfd or the process is already gone.

    It is the fork server's child, which reaps it: should that happen and the pid be
    reused before the pidfd is opened, the future watches the wrong process, and the
    lock's polling, which goes on beside it, still sees the call end."""
    if pid is None or not hasattr(os, "pidfd_open"):
        return None
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # already reaped, or a kernel without pidfd_open (Linux < 5.3)
        return None
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not exited.done():
            exited.set_result(None)

    def closed(_: asyncio.Future[None]) -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)

    loop.add_reader(pidfd, readable)
    exited.add_done_callback(closed)
    return exited


def _lock_free(lock: Path) -> bool:
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _kill_holder(lock: Path) -> None:
    # The holder is alive (it holds the lock), so its pid, which is its process group id,
    # cannot have been reused: killing the group is safe.
    text = lock.read_text().strip()
    if text.isdigit():
        try:
            os.killpg(int(text), signal.SIGKILL)
        except ProcessLookupError:
            pass
