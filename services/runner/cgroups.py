"""Per-session control groups: a pids and a memory limit for everything one session runs.

Layout (v1: under each of the `pids` and `memory` hierarchies; v2: once, unified):

    <parent>/<session key>/    pids.max and the memory limit; a call's supervisor joins it
                               before its tool starts, so all the tool forks is counted

A session's concurrent calls share its limits. Groups are kept while a session is active
and removed once idle, rather than made and removed per call: fewer memory cgroups
created and torn down (v1 keeps an offlined one around while page cache is charged to
it). Killing a call whole at its end is bubblewrap's pid namespace's job; without bwrap
(development) the runner empties the session's group when the session's last running
call ends, which catches `setsid` escapees.

What it costs: moving the supervisor into the groups (a write to `cgroup.procs`) takes
13-20 ms on this machine (cgroup v1, kernel 6.18: the migration waits for an RCU grace
period), which is most of the ~12 ms a bash call's latency grew by. It is a wait, not
CPU. cgroup v2 could start the tool in its group directly (clone3 CLONE_INTO_CGROUP);
`cgroup_parent=""` turns the groups off.

The runner must be root; where groups cannot be made, `detect` says so and the runner runs
without them (rlimits and the per-session uid still apply).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)
MOUNT = Path("/sys/fs/cgroup")
# A session's groups are removed after this long unused by this runner; at start, empty
# groups older than this (left by a runner that died) are removed too.
IDLE_S = 600.0
SWEEP_EVERY_S = 60.0


@dataclass
class Cgroups:
    version: int
    parents: tuple[Path, ...]  # v1: <pids>/<parent>, <memory>/<parent>; v2: <unified>/<parent>
    pids: int
    memory_bytes: int
    _used: dict[str, float] = field(default_factory=dict)  # session key -> last use (monotonic)
    _swept_at: float | None = None

    def describe(self) -> str:
        return (f"cgroup v{self.version} under {', '.join(map(str, self.parents))}: per session "
                f"pids.max={self.pids}, memory={self.memory_bytes} bytes")

    def enter(self, session_dir: str) -> list[str]:
        """The session's group dirs, made (with their limits) if this runner has not yet."""
        key = _key(session_dir)
        now = time.monotonic()
        if key not in self._used:
            for parent in self.parents:
                group = parent / key
                _mkdir(group)
                self._limit(group)
        self._used[key] = now
        if self._swept_at is None or now - self._swept_at > SWEEP_EVERY_S:
            self._sweep(now, first=self._swept_at is None)
        return [str(parent / key) for parent in self.parents]

    def _limit(self, group: Path) -> None:
        if self.version == 2:
            _write(group / "pids.max", str(self.pids))
            _write(group / "memory.max", str(self.memory_bytes))
            _write_if_present(group / "memory.swap.max", "0")
        else:  # each v1 hierarchy has only its own controller's files
            _write_if_present(group / "pids.max", str(self.pids))
            _write_if_present(group / "memory.limit_in_bytes", str(self.memory_bytes))

    def release_all(self) -> None:
        """At shutdown: removes the groups of this runner's sessions (a group a still-running,
        detached call is in refuses, and stays for the runner that adopts the call)."""
        for key in self._used:
            for parent in self.parents:
                _rmdir(parent / key)
        self._used.clear()

    def _sweep(self, now: float, first: bool) -> None:
        """Removes idle sessions' groups (a group with members refuses, and stays)."""
        self._swept_at = now
        for key in [k for k, used in self._used.items() if now - used > IDLE_S]:
            del self._used[key]
            for parent in self.parents:
                _rmdir(parent / key)
        if first:  # what a runner that died left behind
            for parent in self.parents:
                for group in parent.iterdir():
                    if group.is_dir() and group.name not in self._used and _age_s(group) > IDLE_S:
                        _rmdir(group)


def kill_members(group_dirs: list[str], patience_s: float = 5.0) -> int:
    """Kills every process in the groups; the number of kill signals sent.

    v2 has cgroup.kill; v1 only the member list, read and killed until empty (a process
    forking meanwhile is caught on the next pass; the pids limit bounds how many)."""
    killed = 0
    for d in group_dirs:
        group = Path(d)
        if (group / "cgroup.kill").exists():
            _write(group / "cgroup.kill", "1")
        deadline, pause = time.monotonic() + patience_s, 0.0005
        while (pids := _members(group)) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
    return killed


def detect(parent: str, pids: int, memory_bytes: int) -> tuple[Cgroups | None, str]:
    """The control groups this runner can use, and a sentence saying which limits are in force."""
    if not parent:
        return None, "control groups off (cgroup_parent is empty)"
    if os.geteuid() != 0:
        return None, "no control groups: the runner is not root"
    try:
        if (MOUNT / "cgroup.controllers").exists():
            groups = _v2(parent, pids, memory_bytes)
        else:
            groups = _v1(parent, pids, memory_bytes)
    except OSError as err:
        return None, f"no control groups: {err}"
    return groups, groups.describe()


def _v1(parent: str, pids: int, memory_bytes: int) -> Cgroups:
    dirs = []
    for controller in ("pids", "memory"):
        root = MOUNT / controller
        if not (root / "cgroup.procs").exists():
            raise OSError(errno.ENOENT, f"cgroup v1 {controller} hierarchy not mounted at {root}")
        _mkdir(root / parent)
        if not os.access(root / parent, os.W_OK):
            raise OSError(errno.EACCES, f"{root / parent} is not writable")
        dirs.append(root / parent)
    return Cgroups(1, tuple(dirs), pids, memory_bytes)


def _v2(parent: str, pids: int, memory_bytes: int) -> Cgroups:
    available = (MOUNT / "cgroup.controllers").read_text().split()
    missing = {"pids", "memory"} - set(available)
    if missing:
        raise OSError(errno.ENOTSUP, f"cgroup v2 lacks the {' and '.join(sorted(missing))} controller")
    # Enabling controllers for our parent needs them in the root's subtree_control; a
    # container whose root cgroup holds processes cannot, and says so here.
    _write(MOUNT / "cgroup.subtree_control", "+pids +memory")
    _mkdir(MOUNT / parent)
    _write(MOUNT / parent / "cgroup.subtree_control", "+pids +memory")
    return Cgroups(2, (MOUNT / parent,), pids, memory_bytes)


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def _members(group: Path) -> list[int]:
    try:
        return [int(line) for line in (group / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.stat().st_ctime
    except FileNotFoundError:
        return 0.0


def _mkdir(path: Path) -> None:
    try:
        path.mkdir(mode=0o755)
    except FileExistsError:
        pass


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except OSError as err:  # still has members, or gone already
        if err.errno not in (errno.EBUSY, errno.ENOTEMPTY, errno.ENOENT):
            log.warning("could not remove control group %s: %s", path, err)


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _write_if_present(path: Path, text: str) -> None:
    if path.exists():
        _write(path, text)
