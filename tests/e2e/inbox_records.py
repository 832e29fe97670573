"""Raw records on `wakeline.inbox`, as any Kafka client could send them, and the check that
a partition keeps serving: fresh sessions on it are created and complete.

Shared by the e2e failure-isolation and weather tests.
"""

from __future__ import annotations

import asyncio
import uuid

from aiokafka import AIOKafkaProducer

from tests.e2e.sessions import wait_ended, wait_for
from tests.e2e.stored_log import assert_log_whole
from wakeline.contract import commands as c
from wakeline.contract.codec import encode
from wakeline.transport.kafka_io import kafka_auth
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import INBOX, partition_for, record_key

SETTINGS = CommonSettings()  # partitions and limits; the broker is read per call (a test may bring its own)


def produce(values: list[tuple[bytes, bytes]], partition: int) -> None:
    """Raw records onto the inbox, as any Kafka client could send them (up to the broker's limit)."""
    async def send():
        settings = CommonSettings()
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), acks="all",
                                    max_request_size=2_000_000)
        await producer.start()
        try:
            for key, value in values:
                await producer.send_and_wait(INBOX, value, key=key, partition=partition)
        finally:
            await producer.stop()
    asyncio.run(send())


def ids_on(partition: int, count: int) -> list[str]:
    found = []
    while len(found) < count:
        sid = str(uuid.uuid4())
        if partition_for(sid, SETTINGS.partitions) == partition:
            found.append(sid)
    return found


def create(sid: str, tenant: str = "default", policy: str = "tools3") -> c.CreateSession:
    return c.CreateSession(command_id=str(uuid.uuid4()), session_id=sid, tenant=tenant, actor="user:e2e-kafka",
                           message="go", config={"model": f"scripted:{policy}"})


def assert_partition_serves(stack, auditor, partition: int, count: int = 3) -> None:
    """Fresh sessions on `partition` are created and complete: the partition was not stalled."""
    sids = ids_on(partition, count)
    produce([(record_key(sid), encode(create(sid))) for sid in sids], partition)
    for sid in sids:
        wait_for(lambda: auditor.get(f"/v1/sessions/{sid}").status_code == 200, 60, f"{sid} to exist", stack)
        assert wait_ended(auditor, stack, sid)["ended_reason"] == "completed"
        assert_log_whole(sid)
    assert all(s.alive for s in stack.services.values()), stack.report()
