"""A session's directories under the sandbox root, made and handed to its uid on its first
call here, and remembered so that later calls cost two `lstat`s.

Where they are is `session_dir`: `<sandbox_root>/.sessions/<key>`, an opaque key, because a
tool can read its work dir's host path in /proc/self/mountinfo. The layout inside (`work`,
`calls`, `etc`) is `records.py`'s; which uid a session's tools run as is `isolation.py`'s.
"""

from __future__ import annotations

import logging
import os
import stat
from collections import OrderedDict
from pathlib import Path

from wakeline_runner.isolation import Isolation, Owner
from wakeline_runner.records import SAFE_ID, SessionDirs, ensure_dir
from wakeline_runner.settings import RunnerSettings
from wakeline_runner.tool_etc import write_identity_files
from wakeline_runner.tool_view import session_key
from wakeline_runner.tools import ToolFailure

log = logging.getLogger(__name__)
# Sessions whose directories this runner has made or checked (`open`'s fast path).
OPENED_KEPT = 4096
# Under the sandbox root; a dot name, so no tenant's directory (an older layout's) is it.
SESSIONS = ".sessions"


class SessionDirectories:
    def __init__(self, settings: RunnerSettings, isolation: Isolation):
        self.settings = settings
        self.isolation = isolation
        self._opened: OrderedDict[tuple[str, str], SessionDirs] = OrderedDict()

    def open(self, tenant: str, session_id: str) -> SessionDirs:
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
        dirs = self._make(tenant, session_id)
        self._opened[key] = dirs
        if len(self._opened) > OPENED_KEPT:
            self._opened.popitem(last=False)
        return dirs

    def _make(self, tenant: str, session_id: str) -> SessionDirs:
        for name, value in (("tenant", tenant), ("session_id", session_id)):
            if not SAFE_ID.match(value) or value in (".", ".."):
                raise ToolFailure("invalid_input", f"{name} {value!r} cannot name a sandbox directory")
        session = self._session_dir(tenant, session_id)
        # Parents are traversable but not listable (and under bwrap not even there).
        ensure_dir(self.settings.sandbox_root, 0o711, parents=True)
        ensure_dir(session.parent, 0o711)
        ensure_dir(session, 0o711)
        owner = self.isolation.identity(tenant, session_id)
        work = session / "work"
        dirs = SessionDirs(work=work, calls=session / "calls", etc=session / "etc", owner=owner,
                           seen_as=self.isolation.seen_as(work))
        ensure_dir(dirs.calls, 0o700)
        ensure_dir(dirs.work, 0o700)
        if owner is not None and os.lstat(dirs.work).st_uid != owner[0]:
            _hand_over(dirs.work, owner)
        if self.isolation.use_bwrap:
            write_identity_files(dirs.etc, owner, dirs.seen_as)
        return dirs

    def _session_dir(self, tenant: str, session_id: str) -> Path:
        """`session_dir`, or where a runner before opaque names made it: moving that one could
        pull it from under a call still running in it, so it stays (its tools can read its
        tenant and session id in /proc/self/mountinfo; docs/sandbox.md says so)."""
        session = session_dir(self.settings.sandbox_root, tenant, session_id)
        named = self.settings.sandbox_root / tenant / session_id
        if not session.exists() and named.is_dir():
            log.warning("session %s of tenant %s keeps its sandbox at %s, made before sandboxes had opaque "
                        "names: its tools can read both names in their mount table", session_id, tenant, named)
            return named
        return session


def session_dir(sandbox_root: Path, tenant: str, session_id: str) -> Path:
    """Where a session's directories are on the host, named by nothing a tool may not know."""
    return sandbox_root / SESSIONS / session_key(tenant, session_id)


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
