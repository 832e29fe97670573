"""Postgres roles log in only with the generated passwords, which stay in a private file.

Before issue 9 every role's password was its own name; `pg.sh up` now sets each role's
password from `.data/credentials.env` (deploy/credentials.sh), and pg_hba asks for
scram-sha-256 on every TCP connection.
"""

from __future__ import annotations

import os
import stat
import subprocess
from urllib.parse import urlsplit

import asyncpg
import pytest

from conftest_pg import PG_SH, connected, require_postgres
from tests.requirements import require
from wakeline.ops.retention import RetentionSettings
from wakeline.runtime.settings import AdminSettings, CommonSettings, credentials_file

pytestmark = pytest.mark.postgres

ROLES = ("wakeline_owner", "wakeline_service", "wakeline_maintenance")
PRINCIPALS = ("admin", "brain", "runner", "archiver", "gateway")
BOOTSTRAP = PG_SH.parent / "bootstrap.sql"


def _server() -> tuple[str, int]:
    dsn = urlsplit(CommonSettings().postgres_dsn)
    return dsn.hostname or "127.0.0.1", dsn.port or 5432


@pytest.mark.parametrize("role", ROLES)
async def test_a_role_cannot_log_in_with_its_name_as_password(role: str) -> None:
    await require_postgres()
    host, port = _server()
    with pytest.raises(asyncpg.InvalidPasswordError):
        await asyncpg.connect(host=host, port=port, user=role, password=role, database=CommonSettings().database,
                              timeout=10)


async def test_a_role_cannot_log_in_over_tcp_without_a_password() -> None:
    await require_postgres()
    host, port = _server()
    with pytest.raises((asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError)):
        await asyncpg.connect(host=host, port=port, user="wakeline_service", password="",
                              database=CommonSettings().database, timeout=10)


async def test_every_role_logs_in_with_the_settings_it_reads_from_the_file() -> None:
    await require_postgres()
    for dsn in (CommonSettings().postgres_dsn, AdminSettings().postgres_admin_dsn,
                RetentionSettings().postgres_maintenance_dsn):
        async with connected(dsn) as conn:
            assert await conn.fetchval("SELECT current_user") == urlsplit(dsn).username


def test_the_generated_file_is_private_and_no_password_is_a_name() -> None:
    path = credentials_file()
    require(path.exists(), f"{path} is missing: `make up` (or deploy/credentials.sh ensure) generates it")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, oct(path.stat().st_mode)
    values = dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))
    wanted = {f"WAKELINE_KAFKA_PASSWORDS__{p.upper()}" for p in PRINCIPALS} | {
        f"WAKELINE_POSTGRES_PASSWORDS__{r.upper()}" for r in ROLES}
    assert wanted <= values.keys(), sorted(wanted - values.keys())
    names = {n.lower() for n in PRINCIPALS + ROLES} | {"postgres"}
    assert not [k for k, v in values.items() if v.lower() in names or len(v) < 24]
    assert len(set(values.values())) == len(values), "two principals share a password"


@pytest.mark.parametrize("owner_password", ["wakeline_owner", ""])
def test_bootstrap_refuses_a_password_equal_to_its_role_name_or_empty(owner_password: str) -> None:
    require(os.geteuid() == 0, "psql as the cluster superuser needs root (peer auth maps root to postgres)")
    status = subprocess.run(["bash", str(PG_SH), "status"], capture_output=True, text=True, timeout=60)
    fields = dict(line.split("=", 1) for line in status.stdout.splitlines() if "=" in line)
    require(fields.get("state") == "running", f"pg.sh status reports no running cluster: {status.stdout!r}")
    script = (f"\\set owner_password '{owner_password}'\n\\set service_password 'a-good-one-0123456789'\n"
              f"\\set maintenance_password 'another-good-one-0123'\n" + BOOTSTRAP.read_text())
    done = subprocess.run([f"{fields['bindir']}/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", fields["socket_dir"],
                           "-p", fields["port"], "-U", "postgres", "-d", "postgres"],
                          input=script, capture_output=True, text=True, timeout=60)
    # Refused before any password is set: the roles keep the generated ones.
    assert done.returncode != 0 and "equals its role name" in done.stderr, done.stderr
