"""What a value from a URL or a query may be, so that Postgres is never the first to refuse it.

Ids are plain names (`wakeline.contract.ids`): a path id outside that charset can never name a
session, so it is a 422, not a database error. Positions fit Postgres's bigint. Free text
that reaches a query carries no control characters (Postgres text cannot hold NUL), and
a time must stay a time once converted to UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Path
from pydantic import AfterValidator, BeforeValidator, Field

from wakeline.contract.ids import ID_PATTERN, SAFE_ID

PG_BIGINT_MAX = 2**63 - 1
NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")

SessionIdPath = Annotated[str, Path(min_length=1, max_length=200, pattern=ID_PATTERN,
                                    description="The session's id (letters, digits and `._:@-`).")]
ToolCallIdPath = Annotated[str, Path(min_length=1, max_length=200, pattern=ID_PATTERN)]
QueryId = Annotated[str, Field(min_length=1, max_length=200, pattern=ID_PATTERN)]


def query_text(max_length: int) -> type[str]:
    """A free-text query value: bounded, no control characters."""
    return Annotated[str, Field(min_length=1, max_length=max_length, pattern=NO_CONTROL)]  # type: ignore[return-value]


def utc_convertible(value: datetime) -> datetime:
    try:
        (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:
        raise ValueError("is out of range once converted to UTC") from None
    return value


def not_a_number(value: object) -> object:
    # pydantic would read `until=0.5` as a Unix time; the API documents ISO 8601 only.
    if isinstance(value, (int, float)) or (isinstance(value, str) and NUMBER.fullmatch(value.strip())):
        raise ValueError("a time is ISO 8601 (e.g. 2026-11-23T00:00:00Z), not a number")
    return value


Moment = Annotated[datetime, BeforeValidator(not_a_number), AfterValidator(utc_convertible)]


def is_plain_id(value: object) -> bool:
    return isinstance(value, str) and SAFE_ID.match(value) is not None


def is_position(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= PG_BIGINT_MAX
