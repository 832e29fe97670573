"""The start-up probe: one sandboxed command, run as a tool would be, before any call is taken.

Each runner process probes in a directory of its own (`<sandbox_root>/.probe-<random>`,
removed after): runners started together on one host share the sandbox root, and with one
fixed probe directory one removed the other's file, which then refused to start blaming
bubblewrap (issue 37). A failure says what failed: bubblewrap missing, bubblewrap itself
refusing (the cases installing it or allowing user namespaces fixes), or the probe's own
checks failing inside a sandbox that did start (which no reinstall fixes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from wakeline_runner.records import SessionDirs, ensure_dir
from wakeline_runner.settings import RunnerSettings
from wakeline_runner.tool_etc import write_identity_files
from wakeline_runner.tool_view import WORK_MOUNT
from wakeline_runner.wrapper import with_bwrap_options

if TYPE_CHECKING:
    from wakeline_runner.isolation import Isolation

INSTALL = ("Install it (deploy/system-deps.sh does), and for a runner that is not root allow unprivileged user "
           "namespaces (sysctl user.max_user_namespaces > 0 and, on Debian, kernel.unprivileged_userns_clone=1); "
           "or run the runner as root. Only for development, WAKELINE_USE_BWRAP=off runs tools unsandboxed "
           "on the host.")
# Write in the work dir and in /tmp as the session's user, as a real tool would, and check
# that the host's private places are not there.
CHECKS = (f'test "$(pwd)" = {WORK_MOUNT} && : > .probe && rm .probe && : > /tmp/.probe '
          "&& test ! -e /root && test ! -e /home")


def try_bwrap(candidate: Isolation, settings: RunnerSettings, env: dict[str, str]) -> str | None:
    """None if a sandboxed command (with a tool's `env`) ran and passed its checks; else what
    failed, as a sentence."""
    if shutil.which("bwrap") is None:
        return f"bwrap is not on PATH. {INSTALL}"
    ensure_dir(settings.sandbox_root, 0o711, parents=True)
    home = Path(tempfile.mkdtemp(prefix=".probe-", dir=settings.sandbox_root))
    try:
        return _probe_in(home, candidate, env)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _probe_in(home: Path, candidate: Isolation, env: dict[str, str]) -> str | None:
    os.chmod(home, 0o711)
    owner = candidate.identity(".probe", "probe")
    dirs = SessionDirs(work=home / "work", calls=home, etc=home / "etc", owner=owner)
    ensure_dir(dirs.work, 0o700)
    if owner is not None:
        os.chown(dirs.work, *owner)
    write_identity_files(dirs.etc, owner, WORK_MOUNT)
    script = CHECKS + (f' && test "$(id -u)" = {owner[0]}' if owner is not None else "")
    command = candidate.command(dirs, script)
    argv, options_fd = with_bwrap_options(command.argv, command.bwrap_options or [])
    try:
        done = subprocess.run(argv, env=env, capture_output=True, timeout=20, pass_fds=(options_fd,))
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"bubblewrap could not be run ({type(err).__name__}: {err}). {INSTALL}"
    finally:
        os.close(options_fd)
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", "replace").strip()[-500:]
    if said.startswith("bwrap:") or "\nbwrap:" in said:
        return f"bubblewrap refused to start a sandbox (exit {done.returncode}: {said}). {INSTALL}"
    return (f"bubblewrap started, but the probe's checks failed inside the sandbox (exit {done.returncode}: {said}): "
            f"a tool could not write its work dir or /tmp, saw the host's /root or /home, or ran as another uid")
