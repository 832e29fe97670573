"""Where a tool sees its work dir, and what names its session's directory on the host.

Under bubblewrap a session's work dir is mounted at `WORK_MOUNT` (`bwrap.py`); `HOME`, the
passwd entry and the file tools' reading of absolute paths (`confinement.py`) agree with it.
Without bubblewrap (`use_bwrap=off`, development) a tool runs at the work dir's host path,
so that is its view. A session's directory on the host is named by `session_key`, not by
its tenant and session id (`session_dirs.py`).
"""

from __future__ import annotations

import hashlib

WORK_MOUNT = "/work"


def session_key(tenant: str, session_id: str) -> str:
    """The name of a session's directory on the host: the same on every runner, and opaque
    (a tool reads it in /proc/self/mountinfo, where a tenant's name must not show)."""
    return hashlib.sha256(f"{tenant}/{session_id}".encode("utf-8")).hexdigest()[:32]

