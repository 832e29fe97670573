"""Per-session sandboxes and the bash tool: launched detached, adopted after a crash.

A bash call runs under `wrapper.py`, a supervisor in its own session that holds the
call's flock while it lives, forked by the runner's fork server (`forkserver.py`). The
runner writes `<id>.started.json` before launching it and never launches a call whose
started record exists, so a tool starts at most once per tool_call_id even if runners
die and the call is redelivered. Whoever handles the call later (the same runner, or a
fresh one after `kill -9`) waits for the lock to be released (bounded by the recorded
deadline; past it the group is killed: `call_lock.py`) and builds the result from what the
wrapper left: exit record and capped output files (`outcome.py`). A session's directories
are `session_dirs.py`'s.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from collections import Counter
from pathlib import Path

from wakeline_runner import cgroups
from wakeline_runner.call_lock import wait_until_released
from wakeline_runner.cgroups import Cgroups
from wakeline_runner.forkserver import ForkServer
from wakeline_runner.isolation import Isolation, rlimits, tool_env
from wakeline_runner.outcome import BashOutcome, outcome_from_files
from wakeline_runner.records import CallFiles, SessionDirs, read_json, write_json
from wakeline_runner.session_dirs import SessionDirectories
from wakeline_runner.settings import RunnerSettings
from wakeline_runner.tools import ToolFailure


class Sandbox:
    def __init__(self, settings: RunnerSettings, isolation: Isolation, groups: Cgroups | None = None):
        self.settings = settings
        self.isolation = isolation
        self.groups = groups
        self._running: Counter[Path] = Counter()  # bash calls in progress per work dir
        self._forks = ForkServer()
        self._dirs = SessionDirectories(settings, isolation)

    def close(self) -> None:
        """Stops the fork server; calls it started run on (they never depended on it)."""
        self._forks.close()

    def open_session(self, tenant: str, session_id: str) -> SessionDirs:
        """The session's directories, made (and handed to its uid) on its first call here."""
        return self._dirs.open(tenant, session_id)

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
                killed = await wait_until_released(files, wrapper_pid)
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
        argv, bwrap_options, drop_to = self.isolation.command(dirs, command)
        return {
            "call_id": files.call_id, "command": command, "argv": argv, "bwrap_options": bwrap_options,
            "cwd": str(dirs.work),
            "env": tool_env(dirs.seen_as), "uid": drop_to[0] if drop_to else None,
            "gid": drop_to[1] if drop_to else None, "limits": rlimits(self.settings),
            "cap": self.settings.output_cap_bytes, "timeout_s": timeout_s,
            # CLOCK_MONOTONIC is system-wide, so another runner on this host can read it.
            "deadline_monotonic": time.monotonic() + timeout_s, "started_at": time.time(),
            "runner": self.settings.host, "bwrap": self.isolation.use_bwrap,
            "stdout_path": str(files.stdout), "stderr_path": str(files.stderr), "exit_path": str(files.exit),
            "cgroups": groups, "work_dir_bytes": self.settings.work_dir_bytes,
            "disk_reserve_bytes": self.settings.disk_reserve_bytes,
        }
