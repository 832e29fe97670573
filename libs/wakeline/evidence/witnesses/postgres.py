"""The Postgres witness: `signed_checkpoints` rows (the envelope and the heads it signed).

The signer writes it first: the statement's number is unique per tenant there, so two
signers racing for the same number lose one insert instead of forking the chain.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping

import asyncpg

from wakeline.evidence.heads import Head
from wakeline.evidence.signed_checkpoints import Envelope, SignedCut
from wakeline.evidence.signing import signature_valid


async def insert(conn: asyncpg.Connection, envelope: Envelope, heads: Mapping[str, Head]) -> None:
    statement = envelope.parsed()
    await conn.execute(
        "INSERT INTO signed_checkpoints (id, tenant, number, created_at, statement, signature, heads) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)", statement.id, statement.tenant, statement.number,
        statement.created_at, envelope.statement, envelope.signature,
        json.dumps({s: h.model_dump(mode="json") for s, h in heads.items()}))


async def read_postgres(conn: asyncpg.Connection) -> list[tuple[Envelope, dict[str, Head]]]:
    """The tenant's rows (the tenant set on `conn`), by number."""
    rows = await conn.fetch("SELECT statement, signature, heads FROM signed_checkpoints ORDER BY number")
    return [(Envelope(statement=r["statement"], signature=r["signature"]),
             {s: Head.model_validate(h) for s, h in json.loads(r["heads"]).items()}) for r in rows]


async def newest_postgres(conn: asyncpg.Connection) -> Envelope | None:
    row = await conn.fetchrow("SELECT statement, signature FROM signed_checkpoints ORDER BY number DESC LIMIT 1")
    return Envelope(statement=row["statement"], signature=row["signature"]) if row else None


async def newest_genuine(conn: asyncpg.Connection, public: bytes, tenant: str) -> tuple[uuid.UUID, Envelope] | None:
    """The newest row of `tenant` whose statement `public` verifies: (its id, the envelope).

    Newest first, without the heads (they are most of a row's bytes): a row forged past it
    costs one signature check each. Runs inside the caller's transaction.
    """
    async for row in conn.cursor("SELECT id, statement, signature FROM signed_checkpoints ORDER BY number DESC",
                                 prefetch=8):
        envelope = Envelope(statement=row["statement"], signature=row["signature"])
        if (signature_valid(public, envelope.statement.encode(), envelope.signature)
                and envelope.parsed().tenant == tenant):  # not another tenant's statement copied in
            return row["id"], envelope
    return None


async def newest_signed(conn: asyncpg.Connection, public: bytes,
                        tenant: str) -> tuple[Envelope, dict[str, Head]] | None:
    """The newest row of `tenant` whose statement `public` verifies, with its heads: a
    round reads one statement's heads, not every checkpoint kept."""
    found = await newest_genuine(conn, public, tenant)
    if found is None:
        return None
    heads = await conn.fetchval("SELECT heads FROM signed_checkpoints WHERE id = $1", found[0])
    return found[1], {s: Head.model_validate(h) for s, h in json.loads(heads).items()}


# A statement's canonical JSON (no spaces) lists its cuts as "cuts":[...]: only the rows
# with any are read, and never their heads.
_WITH_CUTS = """SELECT statement, signature FROM signed_checkpoints WHERE statement LIKE '%"cuts":[{%'"""


async def signed_cuts(conn: asyncpg.Connection, public: bytes, tenant: str) -> set[SignedCut]:
    """Every retention cut a statement of `tenant` that `public` verifies has signed."""
    found: set[SignedCut] = set()
    for row in await conn.fetch(_WITH_CUTS):
        envelope = Envelope(statement=row["statement"], signature=row["signature"])
        if signature_valid(public, envelope.statement.encode(), envelope.signature):
            statement = envelope.parsed()
            if statement.tenant == tenant:
                found.update(statement.cuts)
    return found
