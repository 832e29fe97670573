"""Versioned SQL migrations for the Wakeline database: `python -m wakeline.storage.migrate`.

Files `migrations/NNNN_name.sql` of the `wakeline.storage` package (shipped in the wheel as package
data, read with importlib.resources, so an installed package migrates as a checkout does)
are applied in version order, each once
and in its own transaction, and recorded in `schema_migrations` with a checksum. An
applied file whose checksum changed stops everything: migrations are history, not
configuration. Runs as the schema owner (AdminSettings.postgres_admin_dsn), never as a
service and never as a superuser, so the owner of every object is `wakeline_owner`.
Roles and the database itself are created by deploy/postgres/pg.sh, not here.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sys
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from urllib.parse import urlsplit

import asyncpg

from wakeline.runtime.settings import AdminSettings

MIGRATIONS_DIR: Traversable = files("wakeline.storage") / "migrations"
# Session-level advisory lock key ("wakeline" in ASCII): one migrator at a time.
LOCK_KEY = 0x77616B656C696E65
_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
  version    int         PRIMARY KEY,
  name       text        NOT NULL,
  checksum   text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
)
"""


class MigrationError(RuntimeError):
    """The database and the migration files disagree; nothing further was applied."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str
    checksum: str

    @property
    def label(self) -> str:
        return f"{self.version:04d}_{self.name}"


def load_migrations(directory: Traversable = MIGRATIONS_DIR) -> list[Migration]:
    """Every migration file in `directory`, in version order."""
    found = []
    for path in sorted((p for p in directory.iterdir() if p.name.endswith(".sql")), key=lambda p: p.name):
        match = _FILE_NAME.match(path.name)
        if not match:
            raise MigrationError(f"{path.name}: expected NNNN_name.sql")
        data = path.read_bytes()
        found.append(
            Migration(int(match[1]), match[2], data.decode("utf-8"), hashlib.sha256(data).hexdigest())
        )
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"duplicate migration versions in {directory}")
    return found


def _pending(files: list[Migration], applied: dict[int, str]) -> list[Migration]:
    """Files not yet applied, after checking the applied ones are unchanged and present."""
    by_version = {m.version: m for m in files}
    for version, checksum in sorted(applied.items()):
        migration = by_version.get(version)
        if migration is None:
            raise MigrationError(f"migration {version:04d} is applied but its file is missing")
        if migration.checksum != checksum:
            raise MigrationError(
                f"{migration.label}.sql changed after it was applied "
                f"(checksum {checksum[:12]} in the database, {migration.checksum[:12]} on disk); "
                "add a new migration instead of editing an applied one"
            )
    return [m for m in files if m.version not in applied]


async def _refuse_superuser(conn: asyncpg.Connection) -> None:
    # Objects created by a superuser would be owned by it, and SECURITY DEFINER
    # functions would then run with superuser rights.
    if await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
        raise MigrationError("refusing to migrate as a superuser; connect as wakeline_owner")


async def apply_migrations(dsn: str, directory: Traversable = MIGRATIONS_DIR) -> list[str]:
    """Apply pending migrations; returns the labels applied (empty when up to date)."""
    files = load_migrations(directory)
    conn = await asyncpg.connect(dsn)
    try:
        await _refuse_superuser(conn)
        # Held until the connection closes, whatever happens below.
        await conn.execute("SELECT pg_advisory_lock($1)", LOCK_KEY)
        await conn.execute(_CREATE_TABLE)
        rows = await conn.fetch("SELECT version, checksum FROM schema_migrations")
        applied = []
        for migration in _pending(files, {r["version"]: r["checksum"] for r in rows}):
            async with conn.transaction():
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    migration.version, migration.name, migration.checksum,
                )
            applied.append(migration.label)
        return applied
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    if argv if argv is not None else sys.argv[1:]:
        print("usage: wakeline migrate   (no arguments; the settings say where, WAKELINE_POSTGRES_ADMIN_DSN)",
              file=sys.stderr)
        return 2
    settings = AdminSettings()
    database = urlsplit(settings.postgres_admin_dsn).path.lstrip("/")
    try:
        applied = asyncio.run(apply_migrations(settings.postgres_admin_dsn))
    except (MigrationError, asyncpg.PostgresError, OSError) as exc:
        print(f"migrate: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for label in applied:
        print(f"migrate: {database}: applied {label}")
    if not applied:
        print(f"migrate: nothing to apply, database {database} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
