"""An audit query (`AuditQuery`) and the cursor that pages it. Pure; the SQL a query runs is
the gateway's read model's (`read_model/audit.py`).

Pages are keyset-paged in (ts, session_id, seq) order, which is total and stable: a
cursor names the last row seen, never an offset, so a page is as cheap deep in the log as
at its start and no row is skipped or repeated while the log grows (an event archived
later with an older ts than the cursor is, by construction, not in a later page: exports
of a window still being written should end at a past `until`).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from wakeline.contract.events import Event
from wakeline_gateway.bounds import is_plain_id, is_position, utc_convertible


class BadCursor(ValueError):
    pass


@dataclass(frozen=True)
class AuditQuery:
    actors: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    types: tuple[str, ...] = ()
    tool: str | None = None
    session_id: str | None = None
    outcome: str | None = None  # "error" | "ok": tool results that failed or did not
    limit: int = 100
    after: tuple[datetime, str, int] | None = field(default=None, compare=False)

    def described(self) -> dict[str, Any]:
        """What was asked, for the access log."""
        return {k: (v.isoformat() if isinstance(v, datetime) else list(v) if isinstance(v, tuple) else v)
                for k, v in self.__dict__.items() if v not in (None, ())}


def encode_cursor(event: Event) -> str:
    raw = json.dumps([event.ts.isoformat(), event.session_id, event.seq]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str, int]:
    try:
        ts, session_id, seq = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not (is_plain_id(session_id) and is_position(seq)):  # never raw text or a huge int to Postgres
            raise ValueError("not a position this API issued")
        return utc_convertible(datetime.fromisoformat(ts)), session_id, seq
    except (ValueError, TypeError, binascii.Error) as err:
        raise BadCursor("cursor is not one this API issued; pass next_cursor from a previous page") from err
