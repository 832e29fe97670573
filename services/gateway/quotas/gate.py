"""`QuotaGate`: whether a tenant's command may go to `wakeline.inbox` now, by its rate quotas.

The dispatcher asks it right before sending, once it knows the command is new (a retry whose
outcome is already recorded sends nothing and counts nothing). A command over a quota is a
429 `quota_exceeded` naming the quota, with `Retry-After`, and nothing goes to Kafka.
"""

from __future__ import annotations

from typing import Protocol

from wakeline.contract.commands import CommandBase
from wakeline_gateway.errors import ApiError
from wakeline_gateway.quotas.rules import WINDOW_S, QuotaValues, Refusal, counted_against, retry_after_s, unit
from wakeline_gateway.quotas.store import QuotaStore


class QuotaExceeded(ApiError):
    def __init__(self, tenant: str, refusal: Refusal):
        wait = retry_after_s(refusal)
        super().__init__(429, f"tenant {tenant!r} is over its quota of {refusal.limit} {unit(refusal.quota)}; "
                              f"nothing was sent: retry in {wait} s", headers={"Retry-After": str(wait)},
                         code="quota_exceeded", quota=refusal.quota, limit=refusal.limit)
        self.tenant, self.quota = tenant, refusal.quota


class Admission(Protocol):
    async def admit(self, command: CommandBase) -> None: ...


class AdmitAll:
    """No quotas."""

    async def admit(self, command: CommandBase) -> None:
        return None


class QuotaGate:
    def __init__(self, store: QuotaStore, defaults: QuotaValues):
        self._store, self._defaults = store, defaults

    async def admit(self, command: CommandBase) -> None:
        """Counts the command against its quotas, or raises `QuotaExceeded` having counted nothing."""
        quotas = counted_against(command)
        if not quotas:
            return  # nothing to count: no round trip
        refusal = await self._store.admit(command.tenant, quotas, [WINDOW_S[q] for q in quotas],
                                          [self._defaults.get(q) for q in quotas])
        if refusal is not None:
            raise QuotaExceeded(command.tenant, refusal)
