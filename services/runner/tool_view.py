"""Where a tool sees its work dir, and keeping the host's paths out of what a tool is told.

Under bubblewrap a session's work dir is mounted at `WORK_MOUNT` (`bwrap.py`); `HOME`, the
passwd entry and the file tools' reading of absolute paths (`confinement.py`) agree with it.
Without bubblewrap (`use_bwrap=off`, development) a tool runs at the work dir's host path,
so that is its view. A session's directory on the host is named by `session_key`, not by
its tenant and session id (`session_dirs.py`).

What the runner itself says can name host paths too (an OSError names its file): `masked`
rewrites them before a message goes into a result. And `/proc/self/mountinfo` shows each
bind mount's source as a path on its filesystem: `exposed_path` says what a tool reads
there, so the runner can say at start whether the sandbox root's location shows.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

WORK_MOUNT = "/work"
SANDBOX_ROOT_SHOWN = "<sandbox root>"
SESSION_DIR_SHOWN = "<session dir>"


def session_key(tenant: str, session_id: str) -> str:
    """The name of a session's directory on the host: the same on every runner, and opaque
    (a tool reads it in /proc/self/mountinfo, where a tenant's name must not show)."""
    return hashlib.sha256(f"{tenant}/{session_id}".encode("utf-8")).hexdigest()[:32]


def masked(text: str, sandbox_root: Path, work: Path | None = None, seen_as: str | None = None) -> str:
    """`text` with the work dir's host path as its tools see it (`seen_as`), and the session's
    directory and the sandbox root as placeholders; one pass, longest path first."""
    names = {str(sandbox_root): SANDBOX_ROOT_SHOWN}
    if work is not None:
        names[str(work.parent)] = SESSION_DIR_SHOWN
        names[str(work)] = seen_as or str(work)
    pattern = "|".join(re.escape(path) for path in sorted(names, key=len, reverse=True))
    return re.sub(pattern, lambda found: names[found.group()], text)


def exposed_path(mountinfo: str, path: Path) -> str:
    """What /proc/self/mountinfo shows as the source of a bind mount of `path`: its path
    from the root of its filesystem ("/" when `path` is that root). `path` is absolute and
    resolved; `mountinfo` is the runner's own, where the last mount on a point is on top."""
    best: tuple[str, str] | None = None  # (mount point, root of the mount on its filesystem)
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) < 5:
            continue
        root, point = _unescaped(fields[3]), _unescaped(fields[4])
        if _within(path, point) and (best is None or len(point) >= len(best[0])):
            best = (point, root)
    if best is None:
        return str(path)
    rest = path.relative_to(best[0])
    return str(Path(best[1]) / rest) if rest.parts else best[1]


def _within(path: Path, point: str) -> bool:
    return path == Path(point) or Path(point) in path.parents


def _unescaped(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in names as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)
