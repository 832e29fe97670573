"""A throwaway Postgres cluster for the tests that restart one.

One server holds the demo's database and the suite's, so restarting the stack's cluster
would cut off every process connected to either: the demo's services among them. A test
that restarts Postgres starts its own instead (`deploy/postgres/pg.sh` on a free port with
a data directory of its own; the roles, passwords and database as `make up` makes them,
migrated) and restarts that one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tests.private_broker import environ
from tests.requirements import missing
from wakeline.ops.retention import RetentionSettings
from wakeline.runtime.settings import AdminSettings, CommonSettings

ROOT = Path(__file__).resolve().parents[1]
PG_SH = ROOT / "deploy" / "postgres" / "pg.sh"
_DSNS = ("WAKELINE_POSTGRES_DSN", "WAKELINE_POSTGRES_ADMIN_DSN", "WAKELINE_POSTGRES_MAINTENANCE_DSN")


@dataclass(frozen=True)
class PrivatePostgres:
    port: int
    env: dict[str, str]  # what pg.sh and the settings need to find this cluster and no other

    def command(self, what: str) -> str:
        """`pg.sh up|down` on this cluster, returning what it said."""
        done = subprocess.run(["bash", str(PG_SH), what], env=self.env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"pg.sh {what} failed:\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr


def _on_port(dsn: str, port: int) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(netloc=f"{parts.netloc.rsplit('@', 1)[0]}@127.0.0.1:{port}"))


@contextmanager
def private_postgres_in_environ(data_dir: Path) -> Iterator[PrivatePostgres]:
    """A private cluster that settings built inside the block connect to (every WAKELINE_*_DSN)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The stack's DSNs (users, database, passwords) on this cluster's port.
    dsns = dict(zip(_DSNS, (_on_port(CommonSettings().postgres_dsn, port),
                            _on_port(AdminSettings().postgres_admin_dsn, port),
                            _on_port(RetentionSettings().postgres_maintenance_dsn, port)), strict=True))
    with environ(WAKELINE_PG_PORT=str(port), WAKELINE_PG_DATA=str(data_dir), **dsns):
        cluster = PrivatePostgres(port, dict(os.environ))
        try:
            started = subprocess.run(["bash", str(PG_SH), "up"], env=cluster.env, capture_output=True, text=True,
                                     timeout=180)
            if started.returncode != 0:
                missing(f"a private Postgres cluster did not start: {started.stdout}{started.stderr}")
            done = subprocess.run([sys.executable, "-m", "wakeline.storage.migrate"], env=cluster.env,
                                  capture_output=True, text=True, timeout=120, cwd=ROOT)
            assert done.returncode == 0, f"migrate on the private cluster: {done.stdout}{done.stderr}"
            yield cluster
        finally:
            subprocess.run(["bash", str(PG_SH), "down"], env=cluster.env, capture_output=True, timeout=120)
            # pg.sh keeps the data (or only the socket) under /var/tmp/wakeline-pg-<hash of the
            # data path> when the postgres user cannot reach or name them where asked.
            shutil.rmtree(f"/var/tmp/wakeline-pg-{hashlib.sha256(str(data_dir).encode()).hexdigest()[:10]}",
                          ignore_errors=True)
            if data_dir.is_symlink():
                data_dir.unlink()
            shutil.rmtree(data_dir, ignore_errors=True)
