"""Signed checkpoints of every session's chain head: `python -m wakeline.evidence.checkpoints write`.

A checkpoint records, for one tenant, each session's last seq and its hash, signed with
HMAC-SHA256 under a key kept in a file the database never sees. It is stored twice: a row
in `checkpoints` (append-only, per-tenant RLS) and a line in `<checkpoint_dir>/<tenant>.jsonl`
outside the database. Comparing a session's stored chain with it is `verify.py`'s job.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import sys
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import asyncpg

from wakeline.log.chain import canonical_json
from wakeline.contract.events import Frozen
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings

SIGNATURE_SCHEME = "hmac-sha256:"
DEFAULT_CHECKPOINT_DIR = Path(".data/checkpoints")
KEY_BYTES = 32


class CheckpointSettings(CommonSettings):
    checkpoint_key_file: Path = Path(".data/keys/checkpoint.key")
    checkpoint_dir: Path = DEFAULT_CHECKPOINT_DIR


class Head(Frozen):
    seq: int
    hash: str


class Checkpoint(Frozen):
    id: uuid.UUID
    tenant: str
    created_at: datetime
    heads: dict[str, Head]
    signature: str = ""

    def signed_bytes(self) -> bytes:
        """Everything but the signature, canonically: what the signature covers."""
        return canonical_json(self.model_dump(mode="json", exclude={"signature"}))


def load_key(path: Path, *, create: bool = True) -> bytes | None:
    """The signing key (hex in `path`); created 0600 from os.urandom when missing and `create`."""
    if not path.exists() and create:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # O_EXCL: two writers starting at once must not end up with different keys.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as out:
                out.write(os.urandom(KEY_BYTES).hex() + "\n")
    try:
        key = bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        return None
    if len(key) != KEY_BYTES:  # an empty or cut file must never sign with a short key
        raise ValueError(f"{path}: expected {KEY_BYTES} bytes of hex, found {len(key)}")
    return key


def sign(key: bytes, checkpoint: Checkpoint) -> Checkpoint:
    digest = hmac.new(key, checkpoint.signed_bytes(), hashlib.sha256).hexdigest()
    return checkpoint.model_copy(update={"signature": SIGNATURE_SCHEME + digest})


def signature_valid(key: bytes, checkpoint: Checkpoint) -> bool:
    return hmac.compare_digest(sign(key, checkpoint).signature, checkpoint.signature)


def new_checkpoint(key: bytes, tenant: str, heads: dict[str, Head], now: datetime) -> Checkpoint:
    # Postgres keeps microseconds; so does datetime, so created_at round-trips exactly.
    return sign(key, Checkpoint(id=uuid.uuid4(), tenant=tenant, created_at=now, heads=heads))


# The tenant's sessions (session_keys, 0020: one row per session), each with its highest
# registered seq and that key's ts: one backward probe of event_keys' primary key per
# session, instead of reading every event. The tenant test repeats RLS's so the planner can
# use session_keys' leading column.
_KEY_HEADS = """
WITH k AS (
  SELECT s.session_id, h.seq, h.ts FROM session_keys s CROSS JOIN LATERAL (
    SELECT seq, ts FROM event_keys WHERE session_id = s.session_id ORDER BY seq DESC LIMIT 1) AS h
   WHERE s.tenant = current_setting('wakeline.tenant', true))
"""

# The head is the events row, as it always was: event_keys keeps the rows retention dropped
# (tombstones, 0004), events does not. So the registered head is looked up in events (by its
# ts: one partition); when retention dropped it, the session's last event still in events
# is its head (the fallback probes every partition, but only for such sessions), and a
# session with no event left has none, as before. Reading events also keeps its RLS
# (wakeline.viewer, 0006) in force. Only the hash of a row events holds is ever signed.
STORED_HEADS = _KEY_HEADS + """
SELECT k.session_id, coalesce(e.seq, f.seq) AS seq, encode(coalesce(e.hash, f.hash), 'hex') AS hash
  FROM k
  LEFT JOIN LATERAL (SELECT seq, hash FROM events
                      WHERE session_id = k.session_id AND seq = k.seq AND ts = k.ts) AS e ON true
  LEFT JOIN LATERAL (SELECT seq, hash FROM events WHERE e.seq IS NULL AND session_id = k.session_id
                      ORDER BY seq DESC LIMIT 1) AS f ON true
 WHERE coalesce(e.seq, f.seq) IS NOT NULL
"""

# What STORED_HEADS replaced (it reads every event of the tenant); kept for the test that
# holds the two equal and for the benchmark's before/after.
STORED_HEADS_BY_SCAN = ("SELECT DISTINCT ON (session_id) session_id, seq, encode(hash, 'hex') AS hash FROM events "
                        "ORDER BY session_id, seq DESC")


async def stored_heads(conn: asyncpg.Connection, *, query: str = STORED_HEADS) -> dict[str, Head]:
    """Each session's last stored event (seq, hash), for the tenant set on `conn` (in a transaction)."""
    # The plan is index probes only, but at 20k sessions its estimate passes jit_above_cost,
    # and compiling it for every partition of events took 4.6 s of a 5.3 s round (EXPLAIN
    # ANALYZE at 1M events); without JIT the round is ~0.5 s. Local to the transaction.
    await conn.execute("SELECT set_config('jit', 'off', true)")
    rows = await conn.fetch(query)
    return {r["session_id"]: Head(seq=r["seq"], hash=r["hash"]) for r in rows}


async def insert_checkpoint(conn: asyncpg.Connection, checkpoint: Checkpoint) -> None:
    await conn.execute(
        "INSERT INTO checkpoints (id, tenant, created_at, heads, signature) VALUES ($1, $2, $3, $4::jsonb, $5)",
        checkpoint.id, checkpoint.tenant, checkpoint.created_at,
        json.dumps(checkpoint.model_dump(mode="json")["heads"]), checkpoint.signature)


async def stored_checkpoints(conn: asyncpg.Connection, session_id: str | None = None, *, newest: int | None = None,
                             ids: Sequence[uuid.UUID] = ()) -> list[Checkpoint]:
    """The tenant's checkpoints in the database, oldest first: all of them, or the `newest`
    naming `session_id` plus those whose id is in `ids`."""
    columns = "id, tenant, created_at, heads, signature"
    if session_id is None:
        rows = await conn.fetch(f"SELECT {columns} FROM checkpoints")
    else:
        rows = await conn.fetch(
            f"(SELECT {columns} FROM checkpoints WHERE heads ? $1 ORDER BY created_at DESC LIMIT $2) "
            f"UNION ALL SELECT {columns} FROM checkpoints WHERE id = ANY($3::uuid[])",
            session_id, newest, list(ids))
    found = {r["id"]: Checkpoint(id=r["id"], tenant=r["tenant"], created_at=r["created_at"],
                                 heads=json.loads(r["heads"]), signature=r["signature"]) for r in rows}
    return sorted(found.values(), key=lambda c: c.created_at)


def anchor_path(directory: Path, tenant: str) -> Path:
    # quote() leaves no "/" in the name, so a tenant cannot point outside `directory`.
    return directory / f"{quote(tenant, safe='')}.jsonl"


def append_anchor(directory: Path, checkpoint: Checkpoint) -> None:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(anchor_path(directory, checkpoint.tenant), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (checkpoint.model_dump_json() + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_anchor(directory: Path, tenant: str) -> list[Checkpoint]:
    """The tenant's checkpoints in the file outside the database; a bad line raises ValueError."""
    try:
        lines = anchor_path(directory, tenant).read_text().splitlines()
    except FileNotFoundError:
        return []
    found = []
    for number, line in enumerate(lines, start=1):
        try:
            found.append(Checkpoint.model_validate_json(line))
        except ValueError as exc:
            raise ValueError(f"{anchor_path(directory, tenant)}:{number}: not a checkpoint: {exc}") from exc
    return found


async def write_checkpoint(pool: TenantPool, key: bytes, tenant: str, *,
                           directory: Path = DEFAULT_CHECKPOINT_DIR,
                           now: datetime | None = None) -> Checkpoint:
    """Signs the tenant's current chain heads, stores the row, then appends the file line.

    Row first: a line in the file then always has a committed row, so a line without
    one means the row was removed.
    """
    async with pool.transaction(tenant) as conn:
        checkpoint = new_checkpoint(key, tenant, await stored_heads(conn), now or datetime.now(UTC))
        await insert_checkpoint(conn, checkpoint)
    append_anchor(directory, checkpoint)
    return checkpoint


async def _write(settings: CheckpointSettings, tenants: list[str], every: float | None) -> None:
    key = load_key(settings.checkpoint_key_file)
    assert key is not None  # created when missing
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
        while True:
            for tenant in tenants:
                checkpoint = await write_checkpoint(pool, key, tenant, directory=settings.checkpoint_dir)
                print(json.dumps({"checkpoint": str(checkpoint.id), "tenant": tenant,
                                  "sessions": len(checkpoint.heads)}), flush=True)
            if every is None:
                return
            await asyncio.sleep(every)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wakeline.evidence.checkpoints")
    parser.add_argument("command", choices=["write"])
    parser.add_argument("--tenant", action="append", required=True, help="repeatable")
    parser.add_argument("--every", type=float, help="seconds between rounds; once if omitted")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        asyncio.run(_write(CheckpointSettings(), args.tenant, args.every))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
