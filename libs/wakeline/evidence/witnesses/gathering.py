"""All three witnesses read for one tenant and cross-checked (cross_check.py): what verify compares chains with."""

from __future__ import annotations

from pathlib import Path

from aiokafka.errors import KafkaError

from wakeline.evidence.cross_check import Evidence, Problem, cross_check
from wakeline.evidence.witnesses.postgres import read_postgres
from wakeline.evidence.witnesses.sink import read_sink
from wakeline.evidence.witnesses.topic import read_topic
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import CHECKPOINTS


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
