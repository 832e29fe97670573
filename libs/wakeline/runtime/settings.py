"""Settings shared by every Wakeline process: where Kafka and Postgres are, and as whom.

Each service extends `CommonSettings` with its own class; nothing else in the code base
reads `os.environ`. Every variable is prefixed `WAKELINE_` (for example
`WAKELINE_KAFKA_BOOTSTRAP`, `WAKELINE_POSTGRES_DSN`).

Passwords come from the credentials file `make up` generates once (`.data/credentials.env`,
see deploy/credentials.sh), read by every settings class as a dotenv file, so nobody
exports anything; the environment overrides it. It holds one password per Kafka
principal (`WAKELINE_KAFKA_PASSWORDS__BRAIN=…`) and per Postgres role
(`WAKELINE_POSTGRES_PASSWORDS__WAKELINE_SERVICE=…`): a process logs in to Kafka as
`kafka_username` (each service's class names its own principal) with that principal's
password, unless `WAKELINE_KAFKA_PASSWORD` is set; every `*_dsn` without a password gets
its user's, and names `WAKELINE_POSTGRES_DATABASE` instead of its own database when that is
set (the rewriting itself is dsn.py's). `Naming` holds the topic prefix, which
`wakeline.contract.topics` alone reads.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, DotEnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from wakeline.runtime.dsn import with_database, with_password, with_port


def _default_root() -> Path:
    """The checkout this module sits in (libs/wakeline/runtime/, as `make` runs it), else the working
    directory: an installed package has no checkout, and its operator runs it from the
    directory that holds `.data/` or sets WAKELINE_ROOT / WAKELINE_CREDENTIALS_FILE."""
    checkout = Path(__file__).resolve().parents[3]
    return checkout if (checkout / "pyproject.toml").is_file() else Path.cwd()



DEFAULT_TOPIC_PREFIX = "wakeline"  # what `make demo` runs under


class _Location(BaseSettings):
    """Where the credentials file is: `WAKELINE_CREDENTIALS_FILE`, else under `WAKELINE_ROOT`
    (the repository by default), as deploy/credentials.sh decides it."""

    model_config = SettingsConfigDict(env_prefix="WAKELINE_", extra="ignore")
    root: Path = Field(default_factory=_default_root)
    credentials_file: Path | None = None

    @property
    def path(self) -> Path:
        return self.credentials_file or self.root / ".data" / "credentials.env"


def credentials_file() -> Path:
    return _Location().path


class Naming(BaseSettings):
    """The prefix of every topic, consumer group and transactional id (`WAKELINE_TOPIC_PREFIX`).

    Read once, by `wakeline.contract.topics` at import (its names are module constants every
    service imports), so it is fixed for the life of a process. `make test` runs the
    suite under `wakeline-test`, `make demo` under the default.
    """

    model_config = SettingsConfigDict(env_prefix="WAKELINE_", extra="ignore")
    # Characters Kafka allows in a topic name; short enough for `<prefix>.dead-letter`.
    topic_prefix: str = Field(default=DEFAULT_TOPIC_PREFIX, pattern=r"^[A-Za-z0-9._-]{1,200}$")


class MissingCredentials(RuntimeError):
    """No password for a principal or role: the stack was never brought up, or the file is elsewhere."""


class CommonSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WAKELINE_", extra="ignore", env_nested_delimiter="__")

    kafka_bootstrap: str = "127.0.0.1:19092"
    # SASL/SCRAM over plaintext on the local broker; a real cluster would say SASL_SSL.
    kafka_security_protocol: Literal["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"] = "SASL_PLAINTEXT"
    kafka_sasl_mechanism: Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] = "SCRAM-SHA-512"
    # The principal this process is. Tools and tests are `admin` (the super user); each
    # service's settings class names its own, whose ACLs kafka_acls.py holds.
    kafka_username: str = "admin"
    kafka_password: SecretStr | None = None
    kafka_passwords: dict[str, SecretStr] = {}
    postgres_passwords: dict[str, SecretStr] = {}
    # The event loop each service runs on (`lifecycle.serve`, the gateway's uvicorn).
    # uvloop: about 10-15% off a tool round trip's p50 on 2 cores (docs/history/benchmarks.md,
    # fourteenth session); "asyncio" is the standard library's, for a platform without it.
    event_loop: Literal["uvloop", "asyncio"] = "uvloop"
    # Every wakeline topic has this many partitions, so partition p of each topic holds
    # the same sessions (see topics.py).
    partitions: int = 6
    # The largest value any record may have, in encoded bytes (see limits.py): commands
    # over it are refused at the gateway (413) and dead-lettered on the inbox, tool
    # output over it is truncated. Below the broker's default message.max.bytes.
    max_record_bytes: int = 1_000_000
    # Topic durability, applied when topics are created and checked at start: 1/1 on
    # the single local broker, 3/2 on a real cluster (docker-compose.yml, docs).
    replication_factor: int = 1
    min_insync_replicas: int = 1
    # wakeline.events and the tool topics are the log until archived: kept forever by
    # default (-1). A finite value must exceed the archiver's worst lag.
    events_retention_ms: int = -1
    # The model-deltas topic (streamed text for live viewers) is not the log: a viewer
    # needs the last few seconds; ten minutes leaves room for a slow consumer.
    deltas_retention_ms: int = Field(default=600_000, ge=1000)
    # The service role: INSERT and SELECT on events, never the owner.
    postgres_dsn: str = "postgresql://wakeline_service@127.0.0.1:15432/wakeline"
    # Each process's Prometheus endpoint (wakeline.runtime.metrics.serve_metrics): `metrics_port` when
    # set (0: any free port), else `metrics_port_base` + the service's offset (brain 1, runner 2,
    # archiver 3, gateway 4). A second clone on one machine sets its own base.
    metrics_enabled: bool = True
    # Log lines as text (the local stack) or JSON (a log pipeline); both carry the session id,
    # seq, tool call id and trace id a line is about (wakeline.runtime.logs).
    log_format: Literal["text", "json"] = "text"
    # Where spans go over OTLP/HTTP (e.g. http://collector:4318/v1/traces); unset: no tracing.
    otlp_endpoint: str | None = None
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    metrics_port_base: int = Field(default=18100, ge=1024, le=65000)
    # When set, the database every `*_dsn` names (its path replaced): `make test` sets
    # `wakeline_test`, so the suite and what it starts never write the demo's database.
    postgres_database: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_]{1,63}$")
    # The local stack's ports, as deploy/kafka/kafka.sh and deploy/postgres/pg.sh read them:
    # when set, `kafka_bootstrap` and every `*_dsn` left at its default point at 127.0.0.1 on
    # them, so a second clone on one machine sets the ports and nothing else. A bootstrap or
    # DSN set explicitly is kept as it is.
    kafka_port: int | None = Field(default=None, ge=1, le=65535)
    pg_port: int | None = Field(default=None, ge=1, le=65535)
    # Model prices in US dollars per million tokens, over the defaults the code knows
    # (`wakeline.contract.prices`), as JSON: {"<model>": {"input_usd_per_mtok": 3,
    # "output_usd_per_mtok": 15}} (cache prices default to 1.25x and 0.1x the input's). The
    # brain binds a budgeted session's price from them; the gateway prices what it shows.
    model_prices: dict[str, dict[str, float]] = {}

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file's path is decided when settings are built, not at import. One this
        # user may not read (root's 0600 file, a non-root process) is passed over: its
        # passwords can still come from the environment, and a missing one is named when
        # it is needed (kafka_login), not as a PermissionError here.
        path = credentials_file()
        readable = not path.exists() or os.access(path, os.R_OK)
        if not readable:
            logging.getLogger(__name__).warning("cannot read %s (uid %d); passwords only from the environment",
                                                path, os.getuid())
        credentials = DotEnvSettingsSource(settings_cls, env_file=path if readable else None)
        return init_settings, env_settings, credentials, file_secret_settings

    @model_validator(mode="after")
    def _dsn_database_and_passwords(self) -> CommonSettings:
        if self.kafka_port is not None and "kafka_bootstrap" not in self.model_fields_set:
            self.kafka_bootstrap = f"127.0.0.1:{self.kafka_port}"
        for name in type(self).model_fields:
            if name.endswith("_dsn"):
                dsn = getattr(self, name)
                if self.pg_port is not None and name not in self.model_fields_set:
                    dsn = with_port(dsn, self.pg_port)
                dsn = with_database(dsn, self.postgres_database)
                setattr(self, name, with_password(dsn, self.postgres_passwords))
        return self

    @property
    def database(self) -> str:
        """The database `postgres_dsn` names (every `*_dsn` names it when `postgres_database` is set)."""
        return urlsplit(self.postgres_dsn).path.lstrip("/")

    def kafka_login(self) -> tuple[str, str]:
        """(principal, password) this process logs in to Kafka with."""
        password = self.kafka_password or self.kafka_passwords.get(self.kafka_username.lower())
        if password is None:
            raise MissingCredentials(
                f"no Kafka password for principal {self.kafka_username!r}: set WAKELINE_KAFKA_PASSWORD, or run "
                f"`make up`, which generates {credentials_file()} (WAKELINE_CREDENTIALS_FILE names another)")
        return self.kafka_username, password.get_secret_value()


class AdminSettings(CommonSettings):
    """For migrations and topic creation: the schema owner, never used by a service."""

    postgres_admin_dsn: str = "postgresql://wakeline_owner@127.0.0.1:15432/wakeline"
