"""Per-session sandboxes and the bash tool: launched detached, adopted after a crash.

A bash call runs under `wrapper.py`, a supervisor in its own session that holds the
call's flock while it lives, forked by the runner's fork server (`forkserver.py`). The
runner writes `<id>.started.json` before launching it and never launches a call whose
started record exists, so a tool starts at most once per tool_call_id even if runners
die and the call is redelivered. Whoever handles the call later (the same runner, or a
fresh one after `kill -9`) waits for the lock to be released (bounded by the recorded
deadline; past it the group is killed) and builds the result from what the wrapper
left: exit record and capped output files.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import stat
import time
from collections import Counter, OrderedDict
from pathlib import Path

from wakeline_runner import cgroups
from wakeline_runner.cgroups import Cgroups
from wakeline_runner.forkserver import ForkServer
from wakeline_runner.isolation import Isolation, Owner, rlimits, tool_env, write_identity_files
from wakeline_runner.outcome import BashOutcome, outcome_from_files
from wakeline_runner.records import SAFE_ID, CallFiles, SessionDirs, ensure_dir, read_json, write_json
from wakeline_runner.settings import RunnerSettings
from wakeline_runner.tools import ToolFailure

# How long past its deadline a wrapper may take to record its own timeout before we kill it.
GRACE_S = 5.0
# Sessions whose directories this runner has made or checked (`open_session`'s fast path).
OPENED_KEPT = 4096


class Sandbox:
    def __init__(self, settings: RunnerSettings, isolation: Isolation, groups: Cgroups | None = None):
        self.settings = settings
        self.isolation = isolation
        self.groups = groups
        self._running: Counter[Path] = Counter()  # bash calls in progress per work dir
        self._forks = ForkServer()
        self._opened: OrderedDict[tuple[str, str], SessionDirs] = OrderedDict()

    def close(self) -> None:
        """Stops the fork server; calls it started run on (they never depended on it)."""
        self._forks.close()

    def open_session(self, tenant: str, session_id: str) -> SessionDirs:
        """The session's directories, made (and handed to its uid) on its first call here.
        A session this runner opened before costs two `lstat`s, not five `mkdir`s: py-spy
        had them at a seventh of the runner's loop on no-op calls (docs/history/benchmarks.md,
        eleventh session). A calls or work dir gone missing is made again, and a work dir
        that another uid owns is handed back, as on a first call."""
        key = (tenant, session_id)
        known = self._opened.get(key)
        if known is not None and _intact(known):
            self._opened.move_to_end(key)
            return known
        dirs = self._open_session(tenant, session_id)
        self._opened[key] = dirs
        if len(self._opened) > OPENED_KEPT:
            self._opened.popitem(last=False)
        return dirs

    def _open_session(self, tenant: str, session_id: str) -> SessionDirs:
        for name, value in (("tenant", tenant), ("session_id", session_id)):
            if not SAFE_ID.match(value) or value in (".", ".."):
                raise ToolFailure("invalid_input", f"{name} {value!r} cannot name a sandbox directory")
        session = self.settings.sandbox_root / tenant / session_id
        # Parents are traversable but not listable (and under bwrap not even there).
        ensure_dir(self.settings.sandbox_root, 0o711, parents=True)
        ensure_dir(session.parent, 0o711)
        ensure_dir(session, 0o711)
        owner = self.isolation.identity(tenant, session_id)
        dirs = SessionDirs(work=session / "work", calls=session / "calls", etc=session / "etc", owner=owner)
        ensure_dir(dirs.calls, 0o700)
        ensure_dir(dirs.work, 0o700)
        if owner is not None and os.lstat(dirs.work).st_uid != owner[0]:
            _hand_over(dirs.work, owner)
        if self.isolation.use_bwrap and not (dirs.etc / "passwd").exists():
            write_identity_files(dirs.etc, owner)
        return dirs

    async def run_bash(self, dirs: SessionDirs, call_id: str, command: str, timeout_s: float) -> BashOutcome:
        """Runs (or adopts, or finalizes) the call and returns how it ended; runs it at most once."""
        files = dirs.call(call_id)
        self._running[dirs.work] += 1
        try:
            while True:
                # Its control groups here (their bookkeeping is the event loop's), the rest in a
                # thread: the started record's fsync held up every other call's events when
                # it ran on the loop (a third of the runner's samples under py-spy).
                groups = self.groups.enter(str(dirs.work.parent)) if self.groups else []
                wrapper_pid = await asyncio.to_thread(self._launch_if_new, dirs, files, command, timeout_s, groups)
                killed = await self._await_release(files, wrapper_pid)
                started = read_json(files.started)
                if started is not None:
                    if not started.get("bwrap") and started.get("cgroups") and self._running[dirs.work] == 1:
                        # No pid namespace took the call's processes down with it: what is
                        # left in the session's groups escaped its process group (setsid).
                        await asyncio.to_thread(cgroups.kill_members, started["cgroups"])
                    return outcome_from_files(files, started, killed)
                # Whoever held the lock died before recording a start: nothing ran, so launch it.
        finally:
            self._running[dirs.work] -= 1
            if not self._running[dirs.work]:
                del self._running[dirs.work]

    def _launch_if_new(self, dirs: SessionDirs, files: CallFiles, command: str, timeout_s: float,
                       groups: list[str]) -> int | None:
        lock_fd = os.open(files.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None  # a wrapper (or a runner launching one) holds it: wait for it
            if files.started.exists():
                return None  # started earlier and its wrapper is gone: only its result remains to read
            self._require_disk(dirs)
            spec = self._spec(dirs, files, command, timeout_s, groups)
            write_json(files.started, spec)
            pid = self._forks.spawn(str(files.started), str(files.log), str(dirs.calls), lock_fd)
            if pid is not None:
                # For whoever reads the calls directory; nothing depends on it (the lock file
                # holds the pid a successor kills), so it is not worth an fsync. The
                # supervisor leads a session of its own: its pid is its group's.
                write_json(files.started, {**spec, "pid": pid, "pgid": pid}, durable=False)
            return pid
        finally:
            os.close(lock_fd)  # the supervisor's copy (sent through the fork server) keeps the lock held

    def _require_disk(self, dirs: SessionDirs) -> None:
        st = os.statvfs(dirs.work)
        free, reserve = st.f_bavail * st.f_frsize, self.settings.disk_reserve_bytes
        if free < reserve:
            raise ToolFailure("too_large", f"the sandboxes' filesystem has {free} bytes free, under the runner's "
                                           f"reserve of {reserve}: bash calls wait until space is freed")

    def _spec(self, dirs: SessionDirs, files: CallFiles, command: str, timeout_s: float, groups: list[str]) -> dict:
        argv, drop_to = self.isolation.command(dirs, command)
        return {
            "call_id": files.call_id, "command": command, "argv": argv, "cwd": str(dirs.work),
            "env": tool_env(dirs.work), "uid": drop_to[0] if drop_to else None,
            "gid": drop_to[1] if drop_to else None, "limits": rlimits(self.settings),
            "cap": self.settings.output_cap_bytes, "timeout_s": timeout_s,
            # CLOCK_MONOTONIC is system-wide, so another runner on this host can read it.
            "deadline_monotonic": time.monotonic() + timeout_s, "started_at": time.time(),
            "runner": self.settings.host, "bwrap": self.isolation.use_bwrap,
            "stdout_path": str(files.stdout), "stderr_path": str(files.stderr), "exit_path": str(files.exit),
            "cgroups": groups, "work_dir_bytes": self.settings.work_dir_bytes,
            "disk_reserve_bytes": self.settings.disk_reserve_bytes,
        }

    async def _await_release(self, files: CallFiles, pid: int | None) -> bool:
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


def _intact(dirs: SessionDirs) -> bool:
    """The calls and work dirs are still real directories, the work dir still the session's uid's."""
    try:
        calls, work = os.lstat(dirs.calls), os.lstat(dirs.work)
    except OSError:
        return False
    return (stat.S_ISDIR(calls.st_mode) and stat.S_ISDIR(work.st_mode)
            and (dirs.owner is None or work.st_uid == dirs.owner[0]))


def _hand_over(work: Path, owner: Owner) -> None:
    """Gives a work dir made before per-session uids (or under another uid range) to the
    session's uid, without following a symlink a tool left in it."""
    for root, dirnames, filenames in os.walk(work):
        for name in dirnames + filenames:
            os.chown(os.path.join(root, name), *owner, follow_symlinks=False)
    os.chown(work, *owner, follow_symlinks=False)


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
