"""API keys: their format, their rows, and the checks the gateway makes. The operator's
commands over them are `wakeline.ops.keys` (`wakeline keys create|revoke|list`).

A key reads `wkl_<key_id>_<secret>`: the id (16 hex) finds the row, the secret (32 random
bytes, base64url) proves possession. Only sha256(secret) is stored; the secret has 256
bits of entropy, so a plain hash is enough (no stretching needed) and a leaked table
yields no usable key. Keys are created and revoked by an operator as the schema owner;
the tables are append-only (0006), so revoking adds a row and nothing is ever edited.
The gateway reads a key only through `api_key_lookup(key_id)`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from typing import Any, Literal, NamedTuple, get_args

import asyncpg

Role = Literal["user", "auditor", "admin", "service"]
ROLES: tuple[str, ...] = get_args(Role)
PREFIX = "wkl"
_KEY = re.compile(r"^wkl_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
PRINCIPAL = re.compile(r"^[A-Za-z0-9._@-]{1,100}$")
# Compared against when the id is unknown, so a miss costs the same as a wrong secret.
_NO_SUCH_KEY = "0" * 64


class ParsedKey(NamedTuple):
    key_id: str
    secret: str


class StoredKey(NamedTuple):
    tenant: str
    principal: str
    role: str
    secret_hash: str
    revoked: bool


def new_key() -> tuple[str, str, str]:
    """(key as shown once to its holder, key_id, secret_hash to store)."""
    key_id = secrets.token_hex(8)
    secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
    return f"{PREFIX}_{key_id}_{secret}", key_id, hash_secret(secret)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_key(text: str) -> ParsedKey | None:
    match = _KEY.match(text.strip())
    return ParsedKey(match[1], match[2]) if match else None


def secret_matches(secret: str, stored: StoredKey | None) -> bool:
    """Constant-time in the secret whether or not the key id was found."""
    expected = stored.secret_hash if stored is not None else _NO_SUCH_KEY
    return hmac.compare_digest(hash_secret(secret), expected) and stored is not None


async def lookup(conn: asyncpg.Connection, key_id: str) -> StoredKey | None:
    row = await conn.fetchrow("SELECT tenant, principal, role, secret_hash, revoked FROM api_key_lookup($1)",
                              key_id)
    return StoredKey(**dict(row)) if row is not None else None


async def create(conn: asyncpg.Connection, tenant: str, principal: str, role: str,
                 note: str | None = None) -> tuple[str, str]:
    """(key, key_id). The key is shown once; only its hash is stored."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    if not PRINCIPAL.match(principal):
        raise ValueError("principal must be 1-100 of letters, digits and . _ @ -")
    if not tenant:
        raise ValueError("tenant must not be empty")
    key, key_id, secret_hash = new_key()
    await conn.execute("INSERT INTO api_keys (key_id, tenant, principal, role, secret_hash, note) "
                       "VALUES ($1, $2, $3, $4, $5, $6)", key_id, tenant, principal, role, secret_hash, note)
    return key, key_id


async def revoke(conn: asyncpg.Connection, key_id: str) -> bool:
    """True if revoked now, False if it already was; LookupError if there is no such key."""
    if await conn.fetchval("SELECT 1 FROM api_keys WHERE key_id = $1", key_id) is None:
        raise LookupError(f"no key {key_id}")
    status = await conn.execute("INSERT INTO api_key_revocations (key_id) VALUES ($1) "
                                "ON CONFLICT (key_id) DO NOTHING", key_id)
    return bool(status.endswith(" 1"))


async def listing(conn: asyncpg.Connection, tenant: str | None) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        "SELECT k.key_id, k.tenant, k.principal, k.role, k.created_at, k.note, r.revoked_at "
        "FROM api_keys k LEFT JOIN api_key_revocations r USING (key_id) "
        "WHERE $1::text IS NULL OR k.tenant = $1 ORDER BY k.tenant, k.created_at", tenant)
    return [{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in dict(r).items()} for r in rows]
