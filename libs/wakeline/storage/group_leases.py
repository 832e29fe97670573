"""A group member's lease: one Postgres session held for the life of the process (migration
0031). Postgres ends the session the moment the process dies, so the other members learn of
the death in well under a second, where the Kafka group waits for its session timeout."""

from __future__ import annotations

import asyncpg

# How the lease's backend shows in pg_stat_activity.
LEASE_APPLICATION_NAME = "wakeline-lease"


class GroupLease:
    """The lease of `instance_id` in `group_id`, on a connection of its own (never a pooled
    one: a pool hands its connections round and closes idle ones, and the session is the lease).

    `take()` opens the connection and takes the lease; after a broken connection `take()`
    again. `lapsed()` asks, on the same connection, which other members' sessions are gone."""

    def __init__(self, dsn: str, group_id: str, instance_id: str) -> None:
        self.group_id = group_id
        self.instance_id = instance_id
        self._dsn = dsn
        self._conn: asyncpg.Connection | None = None

    @property
    def held(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def take(self) -> None:
        await self.close()
        conn = await asyncpg.connect(self._dsn, server_settings={"application_name": LEASE_APPLICATION_NAME})
        try:
            await conn.execute("SELECT take_group_lease($1, $2)", self.group_id, self.instance_id)
        except BaseException:
            await conn.close()
            raise
        self._conn = conn

    async def lapsed(self, after_s: float) -> list[str]:
        """Members whose session has been gone `after_s` or longer, each returned to one caller
        only (the rows go); never this member itself."""
        if self._conn is None:
            raise ConnectionError("the lease is not held")
        rows = await self._conn.fetch("SELECT lapsed_group_leases($1, $2) AS instance_id", self.group_id, after_s)
        return [r["instance_id"] for r in rows if r["instance_id"] != self.instance_id]

    async def close(self) -> None:
        """Gives the connection up. The row stays: the other members find the session gone
        and remove this member from the group, as a stopped static member never leaves it."""
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                await conn.close(timeout=2)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                conn.terminate()  # a broken connection: its session is gone already
