"""How far the archive reaches: the archiver's group, its stored offsets, its parked sessions.

The archiver writes `archiver_offsets` and `archiver_quarantine` in the same transaction
as the rows they describe; this module is how anyone else reads them (the brain, to know
where the Kafka tail of a session begins), so no other service spells out those tables.
`ARCHIVER_GROUP` (named in `wakeline.topics`, `<prefix>-archiver`) is the archiver's Kafka
consumer group, its faust app id and the `consumer_group` of those rows; tests run
archivers under private groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from wakeline.topics import ARCHIVER_GROUP

__all__ = ["ARCHIVER_GROUP", "Parked", "archived_next_offset", "parked_session"]


@dataclass(frozen=True)
class Parked:
    from_seq: int
    reason: str


async def archived_next_offset(conn: asyncpg.Connection, topic: str, partition: int,
                               group: str = ARCHIVER_GROUP) -> int:
    """The first offset of `topic[partition]` the archive does not hold yet (0: none stored)."""
    offset = await conn.fetchval(
        "SELECT next_offset FROM archiver_offsets WHERE consumer_group = $1 AND topic = $2 AND partition = $3",
        group, topic, partition)
    return offset or 0


async def parked_session(conn: asyncpg.Connection, tenant: str, session_id: str,
                         group: str = ARCHIVER_GROUP) -> Parked | None:
    """Where the archiver parked the session (its archive stops before `from_seq`), if it did."""
    row = await conn.fetchrow(
        "SELECT from_seq, reason FROM archiver_quarantine WHERE tenant = $1 AND session_id = $2"
        " AND consumer_group = $3", tenant, session_id, group)
    return Parked(row["from_seq"], row["reason"]) if row else None
