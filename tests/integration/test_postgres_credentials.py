"""Postgres roles log in only with the generated passwords, which stay in a private file.

Before issue 9 every role's password was its own name; `pg.sh up` now sets each role's
password from `.data/credentials.env` (deploy/credentials.sh), and pg_hba asks for
scram-sha-256 on every TCP connection.
"""

from __future__ import annotations

import stat
from urllib.parse import urlsplit

import asyncpg
import pytest

from conftest_pg import connected, require_postgres
from tests.requirements import require
from wakeline.retention import RetentionSettings
from wakeline.settings import AdminSettings, CommonSettings, credentials_file

pytestmark = pytest.mark.postgres

ROLES = ("wakeline_owner", "wakeline_service", "wakeline_maintenance")
PRINCIPALS = ("admin", "brain", "runner", "archiver", "gateway")


def _server() -> tuple[str, int]:
    dsn = urlsplit(CommonSettings().postgres_dsn)
    return dsn.hostname or "127.0.0.1", dsn.port or 5432


@pytest.mark.parametrize("role", ROLES)
async def test_a_role_cannot_log_in_with_its_name_as_password(role: str) -> None:
    await require_postgres()
    host, port = _server()
    with pytest.raises(asyncpg.InvalidPasswordError):
        await asyncpg.connect(host=host, port=port, user=role, password=role, database="wakeline", timeout=10)


async def test_a_role_cannot_log_in_over_tcp_without_a_password() -> None:
    await require_postgres()
    host, port = _server()
    with pytest.raises((asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError)):
        await asyncpg.connect(host=host, port=port, user="wakeline_service", password="", database="wakeline",
                              timeout=10)


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
