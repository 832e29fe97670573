"""The session routes' read model: the sessions projection and the events of one session.

`SessionStore` is what every session route reads through (`deps.get_store`); its SQL on the
`sessions` and `events` tables is here, in the gateway's read model, so that no route spells
any out. Every query runs in a `TenantPool.transaction(tenant)`, so row-level security decides
what a caller sees; the gateway never writes here. Events are read through an `EventStore`
(`wakeline.storage.event_store`) and come back as the canonical models, exactly as the brain
sealed them; a stored row that is not one raises `wakeline.contract.events.CorruptEvent`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from wakeline.storage import api_keys
from wakeline.evidence import verify, witnesses
from wakeline.evidence.checkpoints import Checkpoint
from wakeline.storage.event_store import EventQuery, EventStore, Scope
from wakeline.contract.events import Event
from wakeline.storage.lineage import prefix_events
from wakeline.storage.pg import TenantPool
from wakeline.evidence.proofs import InclusionProof, proof_from_postgres

SESSION_COLUMNS = ("session_id, owner, title, model, status, last_seq, created_at, updated_at, "
                   "ended_reason, parent_session_id, fork_seq, deleted_at, deleted_by")
SESSION_FIELDS = tuple(column.strip() for column in SESSION_COLUMNS.split(","))
PAGE = 1000
_TOKENS = "coalesce(sum((payload->'usage'->>{!r})::bigint), 0)"
_COSTS = (f"SELECT session_id, count(*) AS model_calls, {_TOKENS.format('output_tokens')} AS output_tokens, "
          f"{_TOKENS.format('input_tokens')} + {_TOKENS.format('cache_creation_input_tokens')} "
          f"+ {_TOKENS.format('cache_read_input_tokens')} AS input_tokens "
          "FROM events WHERE tenant = $1 AND session_id = ANY($2) AND ts >= $3 "
          # a model call is a turn or a summary the model wrote, as /cost and /v1/audit/cost count
          "AND (type = 'model_turn' OR (type = 'compaction' AND payload ? 'summary_model')) "
          "GROUP BY session_id")


@dataclass(frozen=True)
class SessionMatch:
    """What a list is filtered by: an exact status; parts of owner, model and title, any case."""

    status: str | None = None
    owner: str | None = None
    model: str | None = None
    title: str | None = None


def contains(text: str) -> str:
    """An ILIKE pattern matching `text` anywhere, its own % and _ taken literally."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


async def _session_row(conn: asyncpg.Connection, scope: Scope, session_id: str) -> asyncpg.Record | None:
    if not scope.tenant:
        raise ValueError("tenant must be a non-empty string")
    return await conn.fetchrow("SELECT * FROM session_row($1, $2, $3)", scope.tenant, scope.viewer or "", session_id)


async def _key_and_session(conn: asyncpg.Connection, key_id: str, session_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT * FROM key_and_session($1, $2)", key_id, session_id)


class SessionStore:
    def __init__(self, pool: TenantPool, events: EventStore):
        self._pool = pool
        self._events = events

    async def ping(self) -> None:
        async with self._pool.system_transaction() as conn:
            await conn.fetchval("SELECT 1")

    async def api_key(self, key_id: str) -> api_keys.StoredKey | None:
        return await self._pool.system_statement(api_keys.lookup, key_id)

    async def key_and_session(self, key_id: str, session_id: str) -> tuple[api_keys.StoredKey | None, dict | None]:
        """The stored key and the session row `session_id` under that key's scope, in one
        round trip (migration 0021): a session route's key check and its first read. The
        row is None when the key is unknown or the session is not there for its scope; the
        caller still checks the secret and revocation (`auth.caller_for`) before using it."""
        row = await self._pool.system_statement(_key_and_session, key_id, session_id)
        if row is None:
            return None, None
        stored = api_keys.StoredKey(row["tenant"], row["principal"], row["role"], row["secret_hash"], row["revoked"])
        if row["session_id"] is None:
            return stored, None
        return stored, {column: row[column] for column in SESSION_FIELDS}

    async def session(self, scope: Scope, session_id: str) -> asyncpg.Record | None:
        """The projection row, deleted or not; callers decide what a deleted one means.

        Every session route reads this first, so it is one round trip: `session_row`
        (migration 0015) sets the scope transaction-locally and reads under row-level
        security, as `TenantPool.transaction` would with four."""
        return await self._pool.system_statement(_session_row, scope, session_id)

    async def sessions(self, scope: Scope, limit: int, cursor: tuple[datetime, str] | None,
                       match: SessionMatch = SessionMatch()) -> list[asyncpg.Record]:
        """Live sessions, newest first; `cursor` is the (created_at, session_id) of the last seen."""
        where, args = ["deleted_at IS NULL", "status <> 'deleted'"], [limit]

        def add(clause: str, *values: object) -> None:
            args.extend(values)
            where.append(clause.format(*(f"${len(args) - len(values) + 1 + n}" for n in range(len(values)))))
        if cursor is not None:
            add("(created_at, session_id) < ({}, {})", *cursor)
        if match.status is not None:
            add("status = {}", match.status)
        for column, text in (("owner", match.owner), ("model", match.model), ("title", match.title)):
            if text is not None:
                add(f"{column} ILIKE {{}} ESCAPE '\\'", contains(text))
        async with self._pool.transaction(*scope) as conn:
            return await conn.fetch(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE {' AND '.join(where)} "
                "ORDER BY created_at DESC, session_id DESC LIMIT $1", *args)

    async def costs(self, scope: Scope, session_ids: list[str], since: datetime) -> dict[str, asyncpg.Record]:
        """Model calls and tokens of each session's own model calls, in one query for a page of
        the list: the (tenant, session_id, seq) index finds each session's events, and `since`
        (the oldest session's creation) spares the monthly partitions before it."""
        async with self._pool.transaction(*scope) as conn:
            rows = await conn.fetch(_COSTS, scope.tenant, session_ids, since)
        return {row["session_id"]: row for row in rows}

    async def events(self, scope: Scope, session_id: str, query: EventQuery) -> list[Event]:
        return await self._events.read(scope, session_id, query)

    async def all_events(self, scope: Scope, session_id: str) -> AsyncIterator[Event]:
        """Every event in seq order, a page at a time."""
        after = 0
        while True:
            page = await self.events(scope, session_id, EventQuery(after=after, limit=PAGE))
            for event in page:
                yield event
            if len(page) < PAGE:
                return
            after = page[-1].seq

    async def history(self, scope: Scope, session_id: str, upto: int) -> list[Event]:
        """Events 1..`upto` of the session's history, a fork's inherited prefix included
        (`wakeline.storage.lineage`); raises `PrefixUnavailable` when some are not in the archive."""
        async with self._pool.transaction(*scope) as conn:
            return await prefix_events(conn, session_id, upto)

    async def forks(self, scope: Scope, parent_ids: list[str]) -> list[asyncpg.Record]:
        """The sessions forked from any of `parent_ids` that the caller may see, deleted ones too."""
        async with self._pool.transaction(*scope) as conn:
            return await conn.fetch(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE parent_session_id = ANY($1::text[]) "
                                    "ORDER BY fork_seq, created_at, session_id", parent_ids)

    async def outcome(self, tenant: str, session_id: str, command_id: str) -> Event | None:
        """The first event the command caused (a queued message causes a second one later)."""
        return await self._events.first_caused_by(Scope(tenant), session_id, command_id)

    async def outcome_for_key(self, tenant: str, session_id: str, key_id: str) -> Event | None:
        """The first event caused by any command under an idempotency key id (idempotency.py)."""
        return await self._events.first_caused_under(Scope(tenant), session_id, key_id)

    async def last_seq(self, tenant: str, session_id: str) -> int:
        return await self._events.last_seq(Scope(tenant), session_id)

    async def verify_session(self, scope: Scope, session_id: str, key: bytes | None,
                             anchored: list[Checkpoint], public: bytes | None = None) -> verify.Report:
        """Recomputes the chain from the raw rows (wakeline.evidence.verify): rows, keys, checkpoints,
        and with `public` the signed checkpoints Postgres holds (witnesses.gather_postgres)."""
        evidence = await witnesses.gather_postgres(self._pool, scope.tenant, public) if public else None
        async with self._pool.transaction(*scope) as conn:
            # The tenant's checkpoint problems name its checkpoints and, for a head that went
            # back, other sessions: an owner reading its own session is not shown those.
            return await verify.verify_session(conn, session_id, key=key, anchored=anchored, evidence=evidence,
                                               tenant_problems=scope.viewer is None)

    async def proof(self, scope: Scope, session_id: str) -> InclusionProof | None:
        """The session's head and Merkle path to the newest signed root naming it (wakeline.evidence.proofs)."""
        async with self._pool.transaction(*scope) as conn:
            return await proof_from_postgres(conn, session_id)

    async def verify_tenant(self, tenant: str, key: bytes | None, anchored: list[Checkpoint],
                            public: bytes | None = None) -> verify.TenantReport:
        evidence = await witnesses.gather_postgres(self._pool, tenant, public) if public else None
        return await verify.verify_all(self._pool, tenant, key=key, anchored=anchored, evidence=evidence)

