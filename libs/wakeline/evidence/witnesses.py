"""The three places a signed checkpoint is kept, and reading them back for verify.

Postgres (`signed_checkpoints`, with the heads), the Kafka topic `<prefix>.checkpoints`
(one partition, kept forever, keyed by tenant) and an append-only file sink (one JSONL
file per tenant under a directory that can be another machine's mount). The signer writes
all three, Postgres first: the statement's number is unique per tenant there, so two
signers racing for the same number lose one insert instead of forking the chain. What
they hold is compared in signed_checkpoints.cross_check.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

import asyncpg
from aiokafka import TopicPartition
from aiokafka.admin import NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from wakeline.evidence.checkpoints import CheckpointSettings, Head
from wakeline.transport.kafka_io import make_admin, make_consumer, make_producer
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings
from wakeline.evidence.signed_checkpoints import Envelope, Evidence, Problem, SignedCut, cross_check
from wakeline.evidence.signing import parse_public_key, pinned, signature_valid
from wakeline.contract.topics import CHECKPOINTS

# Kept forever and never compacted: a compacted topic keeps only a key's last record,
# which would let a newer checkpoint erase the older ones it must sit beside.
TOPIC_CONFIG = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}


class EvidenceSettings(CheckpointSettings):
    """Where verify finds the signed checkpoints' public key and the file sink (the signer's too)."""

    # The public key as 64 hex characters; else read from the file the signer publishes.
    evidence_public_key: str | None = None
    evidence_public_key_file: Path = Path(".data/signer/signer.key.pub")
    # A pin: a public key with another fingerprint (sha256:<hex>) is refused.
    evidence_key_fingerprint: str | None = None
    signer_sink_dir: Path = Path(".data/witness")
    # Verify with no public key at all (chains and HMAC checkpoints only): off, so a deleted
    # key file is an error (verify exits 2), never a quieter verify that passes.
    verify_without_signed_checkpoints: bool = False


class KeySettings(Protocol):
    """Where a public key is configured: EvidenceSettings, and the gateway's settings."""

    @property
    def evidence_public_key(self) -> str | None: ...

    @property
    def evidence_public_key_file(self) -> Path: ...

    @property
    def evidence_key_fingerprint(self) -> str | None: ...


def public_key(settings: KeySettings) -> bytes | None:
    """The pinned public key, or None when none is configured (signed checkpoints unchecked)."""
    if settings.evidence_public_key is not None:
        text = settings.evidence_public_key
    elif settings.evidence_public_key_file.exists():
        text = settings.evidence_public_key_file.read_text()
    elif settings.evidence_key_fingerprint is not None:
        raise ValueError("a key fingerprint is pinned but there is no public key at "
                         f"{settings.evidence_public_key_file}")
    else:
        return None
    return pinned(parse_public_key(text), settings.evidence_key_fingerprint)


# -- postgres -----------------------------------------------------------------------------

async def insert(conn: asyncpg.Connection, envelope: Envelope, heads: Mapping[str, Head]) -> None:
    statement = envelope.parsed()
    await conn.execute(
        "INSERT INTO signed_checkpoints (id, tenant, number, created_at, statement, signature, heads) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)", statement.id, statement.tenant, statement.number,
        statement.created_at, envelope.statement, envelope.signature,
        json.dumps({s: h.model_dump(mode="json") for s, h in heads.items()}))


async def read_postgres(conn: asyncpg.Connection) -> list[tuple[Envelope, dict[str, Head]]]:
    """The tenant's rows (the tenant set on `conn`), by number."""
    rows = await conn.fetch("SELECT statement, signature, heads FROM signed_checkpoints ORDER BY number")
    return [(Envelope(statement=r["statement"], signature=r["signature"]),
             {s: Head.model_validate(h) for s, h in json.loads(r["heads"]).items()}) for r in rows]


async def newest_postgres(conn: asyncpg.Connection) -> Envelope | None:
    row = await conn.fetchrow("SELECT statement, signature FROM signed_checkpoints ORDER BY number DESC LIMIT 1")
    return Envelope(statement=row["statement"], signature=row["signature"]) if row else None


async def newest_genuine(conn: asyncpg.Connection, public: bytes, tenant: str) -> tuple[uuid.UUID, Envelope] | None:
    """The newest row of `tenant` whose statement `public` verifies: (its id, the envelope).

    Newest first, without the heads (they are most of a row's bytes): a row forged past it
    costs one signature check each. Runs inside the caller's transaction.
    """
    async for row in conn.cursor("SELECT id, statement, signature FROM signed_checkpoints ORDER BY number DESC",
                                 prefetch=8):
        envelope = Envelope(statement=row["statement"], signature=row["signature"])
        if (signature_valid(public, envelope.statement.encode(), envelope.signature)
                and envelope.parsed().tenant == tenant):  # not another tenant's statement copied in
            return row["id"], envelope
    return None


async def newest_signed(conn: asyncpg.Connection, public: bytes,
                        tenant: str) -> tuple[Envelope, dict[str, Head]] | None:
    """The newest row of `tenant` whose statement `public` verifies, with its heads: a
    round reads one statement's heads, not every checkpoint kept."""
    found = await newest_genuine(conn, public, tenant)
    if found is None:
        return None
    heads = await conn.fetchval("SELECT heads FROM signed_checkpoints WHERE id = $1", found[0])
    return found[1], {s: Head.model_validate(h) for s, h in json.loads(heads).items()}


# A statement's canonical JSON (no spaces) lists its cuts as "cuts":[...]: only the rows
# with any are read, and never their heads.
_WITH_CUTS = """SELECT statement, signature FROM signed_checkpoints WHERE statement LIKE '%"cuts":[{%'"""


async def signed_cuts(conn: asyncpg.Connection, public: bytes, tenant: str) -> set[SignedCut]:
    """Every retention cut a statement of `tenant` that `public` verifies has signed."""
    found: set[SignedCut] = set()
    for row in await conn.fetch(_WITH_CUTS):
        envelope = Envelope(statement=row["statement"], signature=row["signature"])
        if signature_valid(public, envelope.statement.encode(), envelope.signature):
            statement = envelope.parsed()
            if statement.tenant == tenant:
                found.update(statement.cuts)
    return found


# -- the file sink ------------------------------------------------------------------------

def sink_path(directory: Path, tenant: str) -> Path:
    # quote() leaves no "/" in the name, so a tenant cannot point outside `directory`.
    return directory / f"{quote(tenant, safe='')}.jsonl"


def append_sink(directory: Path, tenant: str, envelope: Envelope) -> None:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(sink_path(directory, tenant), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (envelope.model_dump_json() + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_sink(directory: Path, tenant: str) -> tuple[list[Envelope], list[Problem]]:
    """The sink's envelopes, and a problem per line that is not one (a cut line, a rewrite)."""
    path = sink_path(directory, tenant)
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return [], []
    found, problems = [], []
    for number, line in enumerate(lines, start=1):
        try:
            found.append(Envelope.model_validate_json(line))
        except ValueError:
            problems.append(Problem(checkpoint=None, reason=f"the sink {path}, line {number}: not a signed checkpoint"))
    return found, problems


# -- the topic ----------------------------------------------------------------------------

async def ensure_topic(settings: CommonSettings) -> bool:
    """Creates `<prefix>.checkpoints` (one partition: one order to read); True if created.

    An existing topic whose retention or cleanup policy differs is an error: it would
    delete or compact evidence.
    """
    admin = make_admin(settings)
    await admin.start()
    try:
        try:
            response = await admin.create_topics([NewTopic(CHECKPOINTS, 1, settings.replication_factor, topic_configs={
                **TOPIC_CONFIG, "min.insync.replicas": str(settings.min_insync_replicas)})])
        except TopicAlreadyExistsError:
            response = None
        # The broker answers per topic: 0 created, 36 already there, anything else refused.
        codes = [e["error_code"] for e in (response.to_object()["topic_errors"] if response is not None else [])]
        refused = [c for c in codes if c not in (0, TopicAlreadyExistsError.errno)]
        if refused:
            raise RuntimeError(f"the broker refused to create {CHECKPOINTS}: error code {refused[0]}")
        if codes == [0]:
            return True  # created just now, with TOPIC_CONFIG
        # A topic created a moment ago (by another process) may describe with no entries yet.
        for _ in range(20):
            described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, CHECKPOINTS, None)])
            entries = {e["config_names"]: e["config_value"] for resp in described
                       for r in resp.to_object()["resources"] for e in r["config_entries"]}
            if entries:
                break
            await asyncio.sleep(0.25)
        wrong = {k: entries.get(k) for k, v in TOPIC_CONFIG.items() if entries.get(k) != v}
        if wrong:
            raise RuntimeError(f"topic {CHECKPOINTS} has {wrong}, wanted {TOPIC_CONFIG}: it would lose checkpoints")
        return False
    finally:
        await admin.close()


async def publish(settings: CommonSettings, envelope: Envelope) -> None:
    producer = make_producer(settings)
    await producer.start()
    try:
        await producer.send_and_wait(CHECKPOINTS, envelope.model_dump_json().encode(),
                                     key=envelope.parsed().tenant.encode(), partition=0)
    finally:
        await producer.stop()


async def read_topic(settings: CommonSettings, tenant: str) -> tuple[list[Envelope], list[Problem]]:
    """Every record of `tenant` on the topic, from its first offset to its end now."""
    partition = TopicPartition(CHECKPOINTS, 0)
    consumer = make_consumer(settings, group_id=None, enable_auto_commit=False)
    await consumer.start()
    found: list[Envelope] = []
    problems: list[Problem] = []
    try:
        consumer.assign([partition])
        end = (await consumer.end_offsets([partition]))[partition]
        await consumer.seek_to_beginning(partition)
        while await consumer.position(partition) < end:
            batch = await consumer.getmany(partition, timeout_ms=1000)
            for record in batch.get(partition, []):
                if record.key != tenant.encode():
                    continue
                try:
                    found.append(Envelope.model_validate_json(record.value))
                except ValueError:
                    problems.append(Problem(checkpoint=None,
                                            reason=f"the topic {CHECKPOINTS}, offset {record.offset}: "
                                                   "not a signed checkpoint"))
    finally:
        await consumer.stop()
    return found, problems


# -- all three, for verify ----------------------------------------------------------------

async def gather_postgres(pool: TenantPool, tenant: str, public: bytes) -> Evidence:
    """The tenant's signed checkpoints as Postgres alone holds them, checked under `public`:
    what the gateway can read. Their signatures, numbering and heads are checked; whether
    the topic and the sink agree is not (`Evidence.counts` names postgres only)."""
    async with pool.transaction(tenant) as conn:
        in_postgres = await read_postgres(conn)
    return cross_check(public, tenant, in_postgres, [], [], read=("postgres",))


async def gather(pool: TenantPool, settings: CommonSettings, sink: Path, tenant: str, public: bytes) -> Evidence:
    """Reads the tenant's checkpoints from the three witnesses and cross-checks them."""
    async with pool.transaction(tenant) as conn:
        in_postgres = await read_postgres(conn)
    unreadable: list[Problem] = []
    try:
        on_topic, topic_problems = await read_topic(settings, tenant)
    except (KafkaError, OSError) as exc:  # verify still reports what the others say
        on_topic, topic_problems = [], [Problem(checkpoint=None, reason=f"the topic {CHECKPOINTS} could not be "
                                                                        f"read: {type(exc).__name__}: {exc}")]
    in_sink, sink_problems = read_sink(sink, tenant)
    unreadable.extend([*topic_problems, *sink_problems])
    return cross_check(public, tenant, in_postgres, on_topic, in_sink, unreadable)
