"""What Postgres was asked over a window: statements (pg_stat_statements, per query), transactions
and rows (pg_stat_database) of the services' database, and transaction ids assigned.

pg_stat_statements needs `shared_preload_libraries` (deploy/postgres/pg.sh sets it; a cluster
started before that has it only after a restart). Its extension is created in the `postgres`
database, never in the services' own: the view there shows every database's statements. Without
it, `statements` is None and `unavailable` says why. pg_stat_database is exact only
eventually: a backend that goes idle within a second of its last flush reports its counts
up to 10 s later (PG15's idle stats interval), so they lag a short window. Transaction ids
are exact and immediate, but cluster-wide: they count every database's writing transactions.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from bench.harness import superuser

# Top-level statements of one database, as the services sent them; the superuser's own
# readings (these) left out.
STATEMENTS = ("SELECT s.queryid, sum(s.calls)::bigint AS calls, min(s.query) AS query"
              " FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
              " JOIN pg_roles r ON r.oid = s.userid"
              " WHERE d.datname = $1 AND s.toplevel AND NOT r.rolsuper GROUP BY s.queryid")
DATABASE = ("SELECT xact_commit + xact_rollback AS xacts, tup_inserted, tup_updated,"
            " pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xids"
            " FROM pg_stat_database WHERE datname = $1")


@dataclass
class PgCounts:
    database: dict[str, int]
    statements: dict[int, tuple[int, str]] | None  # queryid -> (calls, query)


class PgStatements:
    """One superuser connection (to `postgres`) for a window's two readings."""

    def __init__(self, conn: asyncpg.Connection, database: str):
        self.conn, self.database, self.unavailable = conn, database, None

    @classmethod
    async def open(cls, database: str) -> "PgStatements":
        reader = cls(await superuser("postgres"), database)
        try:
            await reader.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            await reader.conn.fetch("SELECT 1 FROM pg_stat_statements LIMIT 1")
        except asyncpg.PostgresError as error:
            reader.unavailable = f"pg_stat_statements: {error}"
        return reader

    async def counts(self) -> PgCounts:
        await self.conn.execute("SELECT pg_stat_clear_snapshot()")
        row = await self.conn.fetchrow(DATABASE, self.database)
        statements = None
        if self.unavailable is None:
            statements = {r["queryid"]: (r["calls"], r["query"]) for r in await self.conn.fetch(
                STATEMENTS, self.database)}
        return PgCounts(dict(row), statements)

    async def close(self) -> None:
        await self.conn.close()


def per_step(before: PgCounts, after: PgCounts, steps: int, top: int = 10) -> dict:
    figures: dict = {key: round((after.database[key] - before.database[key]) / steps, 3)
                     for key in after.database}
    if before.statements is None or after.statements is None:
        figures["statements"] = None
        return figures
    grown = {qid: (calls - before.statements.get(qid, (0, ""))[0], query)
             for qid, (calls, query) in after.statements.items()}
    figures["statements"] = round(sum(calls for calls, _ in grown.values()) / steps, 3)
    busiest = sorted(grown.values(), key=lambda cq: -cq[0])[:top]
    figures["top"] = [{"per_step": round(calls / steps, 3), "query": " ".join(query.split())[:120]}
                      for calls, query in busiest if calls > 0]
    return figures
