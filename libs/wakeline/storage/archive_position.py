"""How far the archive reaches: the archiver's group, its stored offsets, its parked sessions.

The archiver writes `archiver_offsets` and `archiver_quarantine` in the same transaction
as the rows they describe; this module is how anyone else reads them (the brain, to know
where the Kafka tail of a session begins), so no other service spells out those tables.
`ARCHIVER_GROUP` (named in `wakeline.contract.topics`, `<prefix>-archiver`) is the archiver's Kafka
consumer group, its faust app id and the `consumer_group` of those rows; tests run
archivers under private groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from wakeline.contract.topics import ARCHIVER_GROUP

__all__ = ["ARCHIVER_GROUP", "Parked", "WakeStart", "wake_start"]


@dataclass(frozen=True)
class Parked:
    from_seq: int
    reason: str


@dataclass(frozen=True)
class WakeStart:
    owner: str | None       # the tenant the log says owns the session; None: nothing of it archived
    next_offset: int        # the first offset of the session's events partition not archived yet (0: none)
    parked: Parked | None   # where the archiver parked the session (its archive stops before from_seq)


# A wake's first three questions (whose session, how far the archive of its partition
# reaches, whether it is parked, the latter under the owner, else the claimed tenant) and
# the tenant its next statement reads as, in one round trip: four before (issue 10: at 500
# new sessions a wake's Postgres round trips were a tenth of the brain's event loop). The
# owner comes first (MATERIALIZED: `session_tenant` runs once); set_config depends on it,
# so it cannot run before it.
WAKE_START = """
WITH owner AS MATERIALIZED (SELECT session_tenant($1) AS tenant)
SELECT owner.tenant AS owner,
       coalesce((SELECT o.next_offset FROM archiver_offsets o
                 WHERE o.consumer_group = $3 AND o.topic = $4 AND o.partition = $5), 0) AS next_offset,
       q.id IS NOT NULL AS parked, q.from_seq, q.reason,
       set_config('wakeline.tenant', coalesce(owner.tenant, $2), true) AS reading_as
FROM owner LEFT JOIN archiver_quarantine q
  ON q.tenant = coalesce(owner.tenant, $2) AND q.session_id = $1 AND q.consumer_group = $3
"""


async def wake_start(conn: asyncpg.Connection, session_id: str, tenant: str, topic: str, partition: int,
                     group: str = ARCHIVER_GROUP) -> WakeStart:
    """The session's owner, how far the archive of `topic[partition]` reaches, and whether the
    archiver parked the session; leaves the transaction reading as the owner (`tenant`, the
    claim, if the archive holds none of it). In a transaction: the tenant is transaction-local."""
    row = await conn.fetchrow(WAKE_START, session_id, tenant, group, topic, partition)
    return WakeStart(row["owner"], row["next_offset"],
                     Parked(row["from_seq"], row["reason"]) if row["parked"] else None)

