"""`QuotaGate`: whether a tenant's command may go to `wakeline.inbox` now, by its rate quotas.

The dispatcher asks it right before sending, once it knows the command is new (a retry whose
outcome is already recorded sends nothing and counts nothing). A command over a quota is a
429 `quota_exceeded` naming the quota, with `Retry-After`, and nothing goes to Kafka.
"""

from __future__ import annotations

from typing import Protocol

from wakeline.contract.commands import CommandBase
from wakeline.contract.quotas import Refusal, exceeded, retry_after_s
from wakeline_gateway.errors import ApiError


class QuotaExceeded(ApiError):
    def __init__(self, tenant: str, refusal: Refusal):
        wait = retry_after_s(refusal)
        super().__init__(429, f"{exceeded(tenant, refusal)}; nothing was sent: retry in {wait} s",
                         headers={"Retry-After": str(wait)},
                         code="quota_exceeded", quota=refusal.quota, limit=refusal.limit)
        self.tenant, self.quota = tenant, refusal.quota


class Admission(Protocol):
    async def admit(self, command: CommandBase) -> None: ...


class AdmitAll:
    """No quotas."""

    async def admit(self, command: CommandBase) -> None:
        return None


class Counts(Protocol):
    """`wakeline.storage.quota_counts.QuotaCounts`, as the gate uses it."""

    async def admit(self, command: CommandBase) -> Refusal | None: ...


class QuotaGate:
    def __init__(self, counts: Counts):
        self._counts = counts

    async def admit(self, command: CommandBase) -> None:
        """Counts the command against its quotas, or raises `QuotaExceeded` having counted nothing."""
        refusal = await self._counts.admit(command)
        if refusal is not None:
            raise QuotaExceeded(command.tenant, refusal)
