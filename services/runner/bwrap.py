"""bubblewrap's options: the root a bash tool sees, built for it, not the host's.

`/usr` (and the `/bin`, `/lib*` links into it) read-only, a minimal `/etc` (`tool_etc.py`),
its own work dir at `WORK_MOUNT` (not at its host path, which would name the deployment's
directories and the session), a fresh size-bounded `/tmp` and `/dev/shm`, a `/proc` of its
own pid namespace, and no network. The project's `.data` (broker and database files, keys),
other sessions' work dirs and the runner's home do not exist in it.

They name host paths (the work dir's, the sandbox root's), so they reach bwrap through a
file descriptor (`--args`, `wrapper.with_bwrap_options`), never on its command line: bwrap
stays in the sandbox as its pid 1, whose command line any tool can read.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from wakeline_runner.tool_view import WORK_MOUNT

# The host's top-level links into /usr (merged /usr), or directories bound read-only.
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# Where a sandbox's own mounts go; the work mount's parents on this list are not recreated.
MOUNTED = ("/", "/usr", "/etc", "/tmp", "/dev", "/proc", "/var")


def bwrap_options(work: Path, system_etc: Path, etc: Path | None, tmp_bytes: int, privileged: bool) -> list[str]:
    # A user namespace would map the session's uid to root outside and break writes to the
    # work dir, so a root runner unshares everything but the user namespace.
    namespaces = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if not privileged:
        namespaces.append("--unshare-user")
    argv = ["--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            argv += ["--ro-bind", str(host), str(host)]
    argv += ["--ro-bind", str(system_etc), "/etc"]
    if etc is not None:
        argv += ["--ro-bind", str(etc / "passwd"), "/etc/passwd", "--ro-bind", str(etc / "group"), "/etc/group"]
    size = str(tmp_bytes)
    argv += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp", "--dev", "/dev",
             "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm", "--proc", "/proc",
             "--dir", "/var", "--symlink", "../tmp", "/var/tmp"]
    # bwrap would create the work mount's parents (none for /work) 0700 root, and then a
    # tool could not resolve its own absolute path (python3 /abs/x.py does): traversable.
    between = [str(p) for p in reversed(PurePosixPath(WORK_MOUNT).parents) if str(p) not in MOUNTED]
    argv += [arg for d in between for arg in ("--perms", "0755", "--dir", d)]
    return argv + ["--bind", str(work), WORK_MOUNT, *namespaces, "--die-with-parent", "--chdir", WORK_MOUNT]
