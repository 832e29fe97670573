"""`QuotaCounts`: a tenant's commands counted against its rate quotas in Postgres, where every
gateway and brain counts the same tenant together (`admit_quotas`, migration 0026). Which
quotas a command counts against, and what a refusal means, are `wakeline.contract.quotas`'.

One statement that is its own transaction: one round trip per command counted, none for a
command that counts against nothing (a declared tool's result).
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from wakeline.contract.commands import CommandBase
from wakeline.contract.quotas import WINDOW_S, QuotaValues, Refusal, counted_against
from wakeline.storage.pg import TenantPool

ADMIT = "SELECT * FROM admit_quotas($1, $2, $3, $4)"


async def _admit(conn: asyncpg.Connection, tenant: str, quotas: Sequence[str], windows_s: Sequence[int],
                 defaults: Sequence[int | None]) -> asyncpg.Record | None:
    return await conn.fetchrow(ADMIT, tenant, quotas, windows_s, defaults)


class QuotaCounts:
    """`defaults`: what applies to a tenant that set no value of its own (None: unlimited)."""

    def __init__(self, pool: TenantPool, defaults: QuotaValues):
        self._pool, self._defaults = pool, defaults

    async def admit(self, command: CommandBase) -> Refusal | None:
        """Counts the command against each quota it counts against, or none when one is full:
        that one's Refusal (what the earlier ones took is given back)."""
        quotas = counted_against(command)
        if not quotas:
            return None  # nothing to count: no round trip
        row = await self._pool.system_statement(_admit, command.tenant, list(quotas), [WINDOW_S[q] for q in quotas],
                                                [self._defaults.get(q) for q in quotas])
        if row is None:
            return None
        return Refusal(row["refused"], row["refused_limit"], row["previous_n"], row["current_n"],
                       row["window_seconds"], row["window_elapsed"])
