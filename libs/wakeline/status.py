"""A session's status: the one definition, shared by the fold, the archiver's `sessions`
projection and the test factories.

Deleted beats ended beats running (in a turn) beats idle; a session nothing has created
yet is `new`. Pure, so every place that shows a status derives it the same way.
"""

from __future__ import annotations

from typing import Literal

Status = Literal["new", "idle", "running", "ended", "deleted"]


def session_status(*, deleted: bool, ended: bool, in_turn: bool, created: bool = True) -> Status:
    if deleted:
        return "deleted"
    if ended:
        return "ended"
    if in_turn:
        return "running"
    return "idle" if created else "new"
