"""A Postgres DSN rewritten: on another port, naming another database, with its user's password.

Pure string work on the URL, for `CommonSettings`, which applies them to every `*_dsn`
(settings.py says when); nothing here reads the environment or the credentials file.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import SecretStr


def with_port(dsn: str, port: int) -> str:
    """`dsn` on `port` of its host."""
    parts = urlsplit(dsn)
    where = parts.netloc.rsplit("@", 1)
    host = where[-1].rsplit(":", 1)[0] if not where[-1].endswith("]") else where[-1]
    return urlunsplit(parts._replace(netloc="@".join([*where[:-1], f"{host}:{port}"])))


def with_database(dsn: str, database: str | None) -> str:
    """`dsn` naming `database` instead of its own (unchanged when `database` is None)."""
    return dsn if database is None else urlunsplit(urlsplit(dsn)._replace(path=f"/{database}"))


def with_password(dsn: str, passwords: dict[str, SecretStr]) -> str:
    """`dsn` with its user's password from `passwords` when it names none (else unchanged)."""
    parts = urlsplit(dsn)
    if parts.password is not None or not parts.username or parts.username.lower() not in passwords:
        return dsn
    secret = quote(passwords[parts.username.lower()].get_secret_value(), safe="")
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{secret}@{host}"))
