"""How much of a tenant's log no signed checkpoint covers yet, and when that makes a round due.

`anchoring_lag` reads it from Postgres (`wakeline-signer lag` prints it; a metrics endpoint
can call it); `observe` sets the gauges an operator alerts on; `due` is the signer's
schedule: `WAKELINE_SIGNER_EVERY_S` seconds or `WAKELINE_SIGNER_EVERY_EVENTS` events.
"""

from __future__ import annotations

import math
from datetime import datetime

from wakeline.evidence import witnesses
from wakeline.runtime import metrics
from wakeline.evidence.heads import newest_event_at
from wakeline.contract.events import Frozen
from wakeline.storage.pg import TenantPool


class Lag(Frozen):
    tenant: str
    newest_event_at: datetime | None
    newest_checkpoint: int | None  # its number
    checkpoint_at: datetime | None
    anchored_through: datetime | None  # newest event ts the newest checkpoint covers
    unanchored_events: int  # events stored after that
    lag_s: float | None  # newest event ts - anchored_through (0 when all anchored; None: nothing anchored yet)


async def anchoring_lag(pool: TenantPool, tenant: str, public: bytes | None = None) -> Lag:
    """How much of `tenant`'s log no signed checkpoint covers yet (read from postgres).

    With `public`, measured from the newest statement it verifies (what the signer does:
    a forged newer row claiming a late `through` must not make the log look anchored);
    without, from the newest row. Counted by event time (`ts > through`): an event archived
    late with a time before `through` is not counted, though the heads signed did not
    hold it (docs/evidence.md, "Known limits"); the next round signs it.
    """
    async with pool.transaction(tenant) as conn:
        if public is None:
            newest = await witnesses.newest_postgres(conn)
        else:
            found = await witnesses.newest_genuine(conn, public, tenant)
            newest = found[1] if found is not None else None
        statement = newest.parsed() if newest else None
        through = statement.through if statement else None
        # Counted before the newest time is read: each statement of this (read committed)
        # transaction sees its own snapshot, so read the other way round an event committed
        # in between was counted as unanchored while the lag still said 0.
        if through is None:
            unanchored = await conn.fetchval("SELECT count(*) FROM events")
        else:
            unanchored = await conn.fetchval("SELECT count(*) FROM events WHERE ts > $1", through)
        newest_event = await newest_event_at(conn)
    if newest_event is None:
        lag: float | None = 0.0
    elif through is None:
        lag = None
    else:
        lag = max((newest_event - through).total_seconds(), 0.0)
    return Lag(tenant=tenant, newest_event_at=newest_event, newest_checkpoint=statement.number if statement else None,
               checkpoint_at=statement.created_at if statement else None, anchored_through=through,
               unanchored_events=unanchored, lag_s=lag)


def due(lag: Lag, now: datetime, every_s: float, every_events: int) -> bool:
    """A tenant needs a checkpoint: unanchored events, and enough time or enough of them."""
    if lag.unanchored_events == 0:
        return False
    if lag.checkpoint_at is None or lag.unanchored_events >= every_events:
        return True
    return (now - lag.checkpoint_at).total_seconds() >= every_s


def observe(lag: Lag) -> None:
    """The tenant's lag as the gauges an operator alerts on (docs/operations.md)."""
    metrics.SIGNER_UNANCHORED.labels(lag.tenant).set(lag.unanchored_events)
    metrics.SIGNER_LAG.labels(lag.tenant).set(math.inf if lag.lag_s is None else lag.lag_s)
