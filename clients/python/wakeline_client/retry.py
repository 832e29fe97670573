"""How long to wait before trying again: exponential backoff, or what `Retry-After` says.

429 and 503 are retried, and so is a request that got no answer at all (a connection
refused or reset, a timeout): a command carries the same `Idempotency-Key` on every
attempt, so the gateway records it once however many times it arrives.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    # Each wait is stretched by up to this fraction at random, so clients cut off together
    # do not come back together.
    jitter: float = 0.2

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before attempt `attempt + 1` (attempt 0 is the first)."""
        asked = parse_retry_after(retry_after)
        if asked is not None:
            return min(asked, self.max_backoff_s)
        backoff = min(self.backoff_s * 2 ** attempt, self.max_backoff_s)
        return backoff * (1 + self.jitter * random.random())


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """`Retry-After` as seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())
