"""Per-session control groups: a pids and a memory limit for everything one session runs.

Layout (v1: under each of the `pids` and `memory` hierarchies; v2: once, unified):

    <parent>/<session key>/           the limits: pids.max and the memory limit
    <parent>/<session key>/<call>/    one bash call's processes (its wrapper joins it first)

A session's concurrent calls share its limits; each call has a group of its own so it can
be killed whole at its end, processes that left its process group or session (`setsid`)
included, without touching the session's other calls. The runner must be root; where the
groups cannot be made, `detect` says so and the runner runs without them (rlimits and the
per-session uid still apply).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
MOUNT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Cgroups:
    version: int
    parents: tuple[Path, ...]  # v1: <pids>/<parent>, <memory>/<parent>; v2: <unified>/<parent>
    pids: int
    memory_bytes: int

    def describe(self) -> str:
        return (f"cgroup v{self.version} under {', '.join(map(str, self.parents))}: per session "
                f"pids.max={self.pids}, memory={self.memory_bytes} bytes")

    def create_call(self, session_dir: str, call_id: str) -> list[str]:
        """Makes the session's groups (limits set) and the call's; returns the call's group dirs."""
        session = _key(session_dir)
        call = _key(call_id)
        dirs = []
        for parent in self.parents:
            group = parent / session
            _mkdir(group)
            self._limit(group)
            if self.version == 2:
                _write(group / "cgroup.subtree_control", "+pids +memory")
            _mkdir(group / call)
            dirs.append(str(group / call))
        return dirs

    def _limit(self, group: Path) -> None:
        if self.version == 2:
            _write(group / "pids.max", str(self.pids))
            _write(group / "memory.max", str(self.memory_bytes))
            _write_if_present(group / "memory.swap.max", "0")
        else:  # each v1 hierarchy has only its own controller's files
            _write_if_present(group / "pids.max", str(self.pids))
            _write_if_present(group / "memory.limit_in_bytes", str(self.memory_bytes))


def join(call_dirs: list[str], pid: int) -> None:
    """Moves `pid` into the call's groups (the wrapper does this to itself before the tool starts)."""
    for d in call_dirs:
        _write(Path(d) / "cgroup.procs", str(pid))


def kill_and_remove(call_dirs: list[str], patience_s: float = 5.0) -> int:
    """Kills every process left in the call's groups and removes them; the number killed.

    v2 has cgroup.kill; v1 has only the member list, so it is read and killed until empty
    (a process forking meanwhile is caught on the next pass; the pids limit bounds it)."""
    killed = 0
    for d in call_dirs:
        group = Path(d)
        if not group.is_dir():
            continue
        if (group / "cgroup.kill").exists():
            _write(group / "cgroup.kill", "1")
        deadline = time.monotonic() + patience_s
        while (pids := _members(group)) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        _rmdir(group)
        _rmdir(group.parent)  # the session's group, once no call of it is running
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


def _mkdir(path: Path) -> None:
    try:
        path.mkdir(mode=0o755)
    except FileExistsError:
        pass


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except OSError as err:  # still has members or sub-groups (another call), or gone already
        if err.errno not in (errno.EBUSY, errno.ENOTEMPTY, errno.ENOENT):
            log.warning("could not remove control group %s: %s", path, err)


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _write_if_present(path: Path, text: str) -> None:
    if path.exists():
        _write(path, text)
