"""A partition held by a transaction of its own writers' producer id that no fence ends (what
a writer's sender dying mid-transaction as the broker stopped left in test_weather) is freed
by the brain that takes it, and serves again; nothing else is lost.

The stray transaction is made on a broker of this module's own (`tests.private_broker`):
making one needs the broker's transaction verification off, and it would hold the suite's
events partition for every later test if the brain failed to end it. The module archives
into a database of its own too (`own_database`): its broker has the suite's topic names,
and the dead letter its archiver stores would occupy the suite's dead-letter position.
"""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from aiokafka import TopicPartition

from tests.e2e.inbox_records import SETTINGS, assert_partition_serves
from tests.e2e.stack import own_database, require_database, running_stack
from tests.private_broker import first_value_at, held_partitions, leave_stray_transaction, private_broker_in_environ
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import ARCHIVER_GROUP, BRAIN_GROUP, EVENTS

PARTITION = 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with private_broker_in_environ(tmp_path_factory.mktemp("broker")) as broker, own_database("wakeline_stray"):
        yield broker


def test_a_stray_transaction_of_the_writers_producer_id_is_ended_and_its_partition_serves(broker, tmp_path_factory):
    require_database()
    asyncio.run(leave_stray_transaction(EVENTS, PARTITION, f"{BRAIN_GROUP}-p{PARTITION}"))
    held = asyncio.run(held_partitions(broker.bootstrap, SETTINGS.partitions))
    assert f"{EVENTS}[{PARTITION}]" in held, held  # the hang is real before any brain runs
    with running_stack(tmp_path_factory.mktemp("e2e"), WAKELINE_SETTLE_PROBE_AFTER_S="1",
                       WAKELINE_ARCHIVER_GROUP=f"{ARCHIVER_GROUP}-stray-{uuid.uuid4().hex[:12]}") as stack:
        key = stack.api_key("e2e-auditor", "auditor")
        with httpx.Client(base_url=stack.url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as auditor:
            assert_partition_serves(stack, auditor, PARTITION, count=2)
        brain_log = stack.services["brain"].log.read_text()
    assert f"{EVENTS}[{PARTITION}]: read-committed end" in brain_log
    assert "committing a transaction of ours" in brain_log
    assert asyncio.run(held_partitions(broker.bootstrap, SETTINGS.partitions)) == \
        "no partition is held by a transaction"
    # ended by a commit: the record is read-committed now (the archiver dead-letters it: not an event)
    assert asyncio.run(first_value_at(CommonSettings(), TopicPartition(EVENTS, PARTITION), 0)) == b"stray"
