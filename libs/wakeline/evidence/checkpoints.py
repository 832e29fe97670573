"""Signed checkpoints of every session's chain head: `python -m wakeline.evidence.checkpoints write`.

A checkpoint records, for one tenant, each session's last seq and its hash, signed with
HMAC-SHA256 under a key kept in a file the database never sees. It is stored twice: a row
in `checkpoints` (append-only, per-tenant RLS) and a line in `<checkpoint_dir>/<tenant>.jsonl`
outside the database. The heads are read by heads.py; comparing a session's stored chain
with a checkpoint is `verify`'s job.
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
from wakeline.evidence.heads import Head, stored_heads
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings

SIGNATURE_SCHEME = "hmac-sha256:"
DEFAULT_CHECKPOINT_DIR = Path(".data/checkpoints")
KEY_BYTES = 32


class CheckpointSettings(CommonSettings):
    checkpoint_key_file: Path = Path(".data/keys/checkpoint.key")
    checkpoint_dir: Path = DEFAULT_CHECKPOINT_DIR


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
