"""When a tenant's daily token quota stops a session, and which tokens count. Pure.

A tenant's `tokens_per_day` works as a session's budget does, across all its sessions: before
a model call the brain reads the tenant's count for the UTC day (`TokenDay`, from Postgres:
`wakeline_brain.tenant_quotas`), and once it has reached the quota the session records
`quota_end` instead of the call: `session_ended`, reason `quota`, its figures in `detail`.
The count is an input to the session, as a model's reply is: the end is recorded, and the
replay check takes it as recorded (`replay_check`), so replay needs no database.

An ended session is continued by a message, as any ended session is; its next model call
checks the count again, so it goes on once the day has rolled over (00:00 UTC) or an admin
raised the quota, and ends `quota` again otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from wakeline.contract import events as e
from wakeline.log.chain import Draft

SYSTEM = "system:brain"


@dataclass(frozen=True)
class TokenDay:
    """A tenant's tokens on one UTC day as the database last counted them, and the quota in
    force (the tenant's own, else the default; None: unlimited)."""

    tenant: str
    day: date
    used: int
    limit: int | None

    @property
    def spent(self) -> bool:
        """Reaching the quota is spending it: the next call would go over."""
        return self.limit is not None and self.used >= self.limit


def tokens_counted(usage: e.Usage) -> int:
    """What a call counts against the quota: every token the model read or wrote, the input
    its prompt cache wrote or served included, as a session budget counts input (`Spent`).
    The quota bounds tokens, not dollars (a budget's `usd` cap prices cache reads at a tenth)."""
    return (usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
            + usage.output_tokens)


def quota_end(day: TokenDay) -> Draft:
    """The `session_ended` a session records instead of a model call once `day` is spent."""
    detail = (f"the tenant's tokens_per_day quota is used: {day.used} of {day.limit} tokens on {day.day.isoformat()} "
              "(UTC); a message continues the session once the day rolls over (00:00 UTC) or the quota is raised")
    return Draft(payload=e.SessionEndedPayload(reason="quota", detail=detail), actor=SYSTEM, trust="instruction")
