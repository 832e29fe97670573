"""How a bash tool is isolated: bubblewrap where it works, else setsid + rlimits + uid drop.

`probe` decides once at start by actually running a sandboxed command, and logs the
decision. Either way the tool runs as the sandbox user with rlimits and an environment
built from constants, so nothing of the runner's own environment (credentials) leaks.
With bwrap the tool also gets no network, its own pid namespace (so killing the
sandbox kills every descendant), a read-only host, and sees only its own work dir.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from wakeline_runner.records import ensure_dir
from wakeline_runner.settings import RunnerSettings

log = logging.getLogger(__name__)
TOOL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def tool_env(work: Path) -> dict[str, str]:
    return {"PATH": TOOL_PATH, "HOME": str(work), "LANG": "C.UTF-8", "TERM": "dumb"}


def rlimits(settings: RunnerSettings) -> dict[str, int]:
    return {"RLIMIT_CPU": settings.cpu_seconds, "RLIMIT_AS": settings.memory_bytes,
            "RLIMIT_FSIZE": settings.file_size_bytes, "RLIMIT_NPROC": settings.nproc, "RLIMIT_CORE": 0}


@dataclass(frozen=True)
class Isolation:
    use_bwrap: bool
    sandbox_root: Path
    drop_to: tuple[int, int] | None  # (uid, gid) when the runner is root; None otherwise
    reason: str

    def command(self, work: Path, script: str) -> tuple[list[str], tuple[int, int] | None]:
        """The argv the wrapper runs, and the (uid, gid) the wrapper itself must drop to."""
        shell = ["bash", "-c", script]
        if not self.use_bwrap:
            return shell, self.drop_to
        argv = bwrap_argv(self.sandbox_root, work, privileged=self.drop_to is not None)
        if self.drop_to is not None:
            # bwrap runs as root (it must, to bind a work dir whose parents the sandbox user
            # cannot traverse) and setpriv drops to the sandbox user inside.
            uid, gid = self.drop_to
            argv += ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs", "--"]
        return argv + shell, None


def bwrap_argv(sandbox_root: Path, work: Path, privileged: bool) -> list[str]:
    # A user namespace would map the sandbox uid to root outside and break writes to the
    # work dir, so a root runner unshares everything but the user namespace.
    namespaces = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if not privileged:
        namespaces.append("--unshare-user")
    root, w = str(sandbox_root), str(work)
    # The directories between the hidden sandbox root and the work dir would be created
    # 0700 root, and then a tool could not resolve its own absolute path (python3 x.py
    # does): create them traversable, listing nothing.
    between = [str(p) for p in reversed(work.parents) if sandbox_root in p.parents]
    dirs = [arg for d in between for arg in ("--perms", "0711", "--dir", d)]
    return ["bwrap", "--ro-bind", "/", "/", "--tmpfs", "/tmp", "--perms", "0711", "--tmpfs", root, *dirs,
            "--bind", w, w, "--dev", "/dev", "--proc", "/proc", *namespaces, "--die-with-parent", "--chdir", w,
            "--"]


def probe(settings: RunnerSettings) -> Isolation:
    drop_to = (settings.sandbox_uid, settings.sandbox_gid) if os.geteuid() == 0 else None
    if drop_to is None:
        log.warning("runner is not root: tools run as uid %d, without a uid drop", os.geteuid())
    plain = Isolation(False, settings.sandbox_root, drop_to, "")
    if settings.use_bwrap == "off":
        return _decided(plain, "use_bwrap=off")
    failure = _try_bwrap(Isolation(True, settings.sandbox_root, drop_to, ""), settings)
    if failure is None:
        return _decided(Isolation(True, settings.sandbox_root, drop_to, "bwrap probe succeeded"), "")
    if settings.use_bwrap == "on":
        raise RuntimeError(f"use_bwrap=on but bubblewrap does not work here: {failure}")
    return _decided(plain, f"bwrap unusable: {failure}")


def _try_bwrap(candidate: Isolation, settings: RunnerSettings) -> str | None:
    if shutil.which("bwrap") is None:
        return "bwrap is not on PATH"
    ensure_dir(settings.sandbox_root, 0o711, parents=True)
    ensure_dir(settings.sandbox_root / ".probe", 0o711)
    work = settings.sandbox_root / ".probe" / "work"
    ensure_dir(work, 0o700)
    if candidate.drop_to is not None:
        os.chown(work, *candidate.drop_to)
    # Write in the work dir as the sandbox user, as a real tool would.
    script = ": > .probe && rm .probe"
    if candidate.drop_to is not None:
        script += f' && test "$(id -u)" = {candidate.drop_to[0]}'
    argv, _ = candidate.command(work, script)
    try:
        done = subprocess.run(argv, env=tool_env(work), capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{type(err).__name__}: {err}"
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.decode('utf-8', 'replace').strip()[-500:]}"
    return None


def _decided(isolation: Isolation, why: str) -> Isolation:
    if isolation.use_bwrap:
        log.info("tool isolation: bubblewrap (%s)", " ".join(bwrap_argv(isolation.sandbox_root, Path("<work>"),
                                                                         isolation.drop_to is not None)))
        return isolation
    log.warning("tool isolation: setsid + rlimits + uid drop, no bubblewrap (%s)", why)
    return Isolation(False, isolation.sandbox_root, isolation.drop_to, why)
