"""Settings shared by every Wakeline process: where Kafka and Postgres are.

Each service extends `CommonSettings` with its own class; nothing else in the code base
reads `os.environ`. Every variable is prefixed `WAKELINE_` (for example
`WAKELINE_KAFKA_BOOTSTRAP`, `WAKELINE_POSTGRES_DSN`).
"""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class CommonSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WAKELINE_", extra="ignore")

    kafka_bootstrap: str = "127.0.0.1:19092"
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
    # The service role: INSERT and SELECT on events, never the owner.
    postgres_dsn: str = "postgresql://wakeline_service:wakeline_service@127.0.0.1:15432/wakeline"


class AdminSettings(CommonSettings):
    """For migrations and topic creation: the schema owner, never used by a service."""

    postgres_admin_dsn: str = "postgresql://wakeline_owner:wakeline_owner@127.0.0.1:15432/wakeline"
