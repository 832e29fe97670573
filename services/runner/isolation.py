"""How a bash tool is isolated: bubblewrap over a minimal root, or nothing (development only).

`probe` decides once at start by actually running a sandboxed command. It fails closed:
with `use_bwrap=on` (the default) a runner whose bubblewrap does not work refuses to
start and says why; `use_bwrap=off` runs tools on the host and is logged as an error.

Under bubblewrap a tool sees a root built for it, not the host's (`bwrap.py`), with a
minimal `/etc` (`tool_etc.py`: a copy of a short list of the host's, and a passwd naming
only root, nobody and the session's own uid) and its work dir at `/work` (`tool_view.py`).

When the runner is root, each session's tools run as a uid of their own (`identity`),
so process limits, which the kernel counts per uid, are per session. Either way the
environment is built from constants, so nothing of the runner's own (credentials) leaks.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from wakeline_runner.bwrap import bwrap_options
from wakeline_runner.bwrap_probe import try_bwrap
from wakeline_runner.records import SessionDirs
from wakeline_runner.settings import RunnerSettings
from wakeline_runner.tool_etc import build_system_etc
from wakeline_runner.tool_view import WORK_MOUNT, exposed_path

log = logging.getLogger(__name__)
TOOL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

Owner = tuple[int, int]  # (uid, gid)


class ToolCommand(NamedTuple):
    argv: list[str]  # what the wrapper runs: bash, or bwrap with the tool's command after `--`
    bwrap_options: list[str] | None  # given to bwrap through a file descriptor, off its command line
    drop_to: Owner | None  # the (uid, gid) the wrapper itself must drop to


def tool_env(home: str) -> dict[str, str]:
    """A tool's whole environment; `home` is its work dir as it sees it."""
    return {"PATH": TOOL_PATH, "HOME": home, "LANG": "C.UTF-8", "TERM": "dumb", "TMPDIR": "/tmp",
            "USER": "session", "LOGNAME": "session"}


def rlimits(settings: RunnerSettings) -> dict[str, int]:
    return {"RLIMIT_CPU": settings.cpu_seconds, "RLIMIT_AS": settings.memory_bytes,
            "RLIMIT_FSIZE": settings.file_size_bytes, "RLIMIT_NPROC": settings.nproc, "RLIMIT_CORE": 0}


@dataclass(frozen=True)
class Isolation:
    use_bwrap: bool
    uid_range: tuple[int, int] | None  # (first uid, count) when the runner is root; None otherwise
    tmp_bytes: int
    reason: str
    system_etc: Path | None = None  # the /etc a tool sees (build_system_etc); needed under bwrap

    def identity(self, tenant: str, session_id: str) -> Owner | None:
        """The (uid, gid) a session's tools and files belong to; None when the runner is not
        root (tools then run as the runner's uid, inside a user namespace under bwrap).

        A hash, not a table: any runner on any host gives a session the same uid, with no
        coordination. Two sessions share a uid with probability 1/count per pair; they
        then share a process limit, never files (work dirs stay 0700 and apart in the
        sandbox's mount namespace)."""
        if self.uid_range is None:
            return None
        first, count = self.uid_range
        digest = hashlib.sha256(f"{tenant}/{session_id}".encode("utf-8")).digest()
        uid = first + int.from_bytes(digest[:8], "big") % count
        return uid, uid

    def seen_as(self, work: Path) -> str:
        """Where a session's tools see its work dir: the sandbox's mount, or (unsandboxed) the host path."""
        return WORK_MOUNT if self.use_bwrap else str(work)

    def command(self, dirs: SessionDirs, script: str) -> ToolCommand:
        """How the wrapper runs a bash tool of this session."""
        shell = ["bash", "-c", script]
        if not self.use_bwrap:
            return ToolCommand(shell, None, dirs.owner)
        if self.system_etc is None:
            raise RuntimeError("bwrap isolation without a system /etc (probe builds it)")
        options = bwrap_options(dirs.work, self.system_etc, dirs.etc, self.tmp_bytes,
                                privileged=self.uid_range is not None)
        argv = ["bwrap", "--"]
        if dirs.owner is not None:
            # bwrap runs as root (it must, to bind a work dir whose parents the session's
            # uid cannot traverse) and setpriv drops to the session's uid inside.
            uid, gid = dirs.owner
            argv += ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs", "--"]
        return ToolCommand(argv + shell, options, None)


def probe(settings: RunnerSettings) -> Isolation:
    uid_range = (settings.sandbox_uid_base, settings.sandbox_uid_count) if os.geteuid() == 0 else None
    if uid_range is None:
        log.warning("runner is not root (uid %d): every session's tools run as that uid, inside a user "
                    "namespace, so process limits are shared between sessions", os.geteuid())
    if settings.use_bwrap == "off":
        log.error("TOOLS RUN UNSANDBOXED ON THE HOST (use_bwrap=off): they see the host's files, network "
                  "and processes. This is for development only; never run it with untrusted sessions")
        return Isolation(False, uid_range, settings.tmp_bytes, "use_bwrap=off")
    candidate = Isolation(True, uid_range, settings.tmp_bytes, "bwrap probe succeeded",
                          build_system_etc(settings.sandbox_root))
    failure = try_bwrap(candidate, settings, tool_env(WORK_MOUNT))
    if failure is not None:
        raise RuntimeError(f"refusing to start: tools must run under bubblewrap, and {failure}")
    log.info("tool isolation: bubblewrap over a minimal root (%s)",
             " ".join(bwrap_options(Path("/<work>"), candidate.system_etc or Path("/<etc>"),
                                    Path("/<session etc>"), settings.tmp_bytes, uid_range is not None)))
    _say_what_mountinfo_shows(settings.sandbox_root)
    return candidate


def _say_what_mountinfo_shows(sandbox_root: Path) -> None:
    """A tool reads its mounts' sources in /proc/self/mountinfo as paths on their filesystem:
    session directories are opaque keys, but the sandbox root's own path shows there unless
    it is the root of a filesystem. Said at start, so an operator knows which it is."""
    try:
        shown = exposed_path(Path("/proc/self/mountinfo").read_text(), sandbox_root)
    except OSError as err:
        log.warning("cannot tell what tools see of the sandbox root in /proc/self/mountinfo: %s", err)
        return
    if shown == "/":
        log.info("tools see no host path in their mount table: the sandbox root is the root of its filesystem")
    else:
        log.warning("tools can read where the sandbox root is on its filesystem (%s) in /proc/self/mountinfo "
                    "(never a tenant's or session's name); mount a filesystem at %s to hide it", shown, sandbox_root)
