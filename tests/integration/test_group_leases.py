"""Migration 0031 and the group removal on the real database and broker: a member's lease
lapses when its Postgres session ends, is handed to one checker only, and not at all when the
member takes it back in time; a lapsed static member is removed from the Kafka group by its
instance id (as the brain principal, under its ACLs), and the survivor is given its partitions
long before the group's session timeout. The brain's loop: tests/unit/test_brain_dead_peers.py;
the whole path with kill -9: tests/e2e/test_dead_brains.py."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from conftest_pg import require_kafka, require_postgres
from wakeline.contract.topics import INBOX
from wakeline.storage.group_leases import GroupLease
from wakeline.transport.group_removal import remove_static_members
from wakeline.transport.kafka_io import make_client, make_consumer
from wakeline_brain.settings import BrainSettings

pytestmark = pytest.mark.postgres


def die(lease: GroupLease) -> None:
    """What kill -9 does to the lease: the socket closes, nothing is said to Postgres."""
    conn = lease._conn
    assert conn is not None
    conn.terminate()
    lease._conn = None


async def lapsed_soon(checker: GroupLease, after_s: float, within_s: float = 10.0) -> list[str]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if found := await checker.lapsed(after_s):
            return found
        await asyncio.sleep(0.1)
    return []


async def test_a_lease_lapses_when_its_session_ends_and_goes_to_one_checker_only() -> None:
    await require_postgres()
    dsn, group = BrainSettings().postgres_dsn, f"leases-{uuid.uuid4().hex[:8]}"
    a, b, c, d = (GroupLease(dsn, group, name) for name in ("a", "b", "c", "d"))
    for lease in (a, b, c, d):
        await lease.take()
    try:
        assert await c.lapsed(0.0) == [] and await d.lapsed(0.0) == []  # all alive
        die(a)
        first = await c.lapsed(0.5)  # marks it: gone, but not yet for 0.5 s
        assert first == []
        await asyncio.sleep(0.6)
        both = await asyncio.gather(c.lapsed(0.5), d.lapsed(0.5))
        assert sorted(both, key=len) == [[], ["a"]]  # one checker gets it, the other nothing
        assert await c.lapsed(0.0) == []  # and it is gone for good
        # Taken back within the wait (a restart under the same name): never lapses.
        die(b)
        assert await c.lapsed(0.5) == []
        await b.take()
        await asyncio.sleep(0.6)
        assert await c.lapsed(0.5) == [] and await d.lapsed(0.0) == []
        # A checker never hands back its own name, and a fresh lease of a lapsed name is alive.
        die(b)
        assert await lapsed_soon(c, 0.0) == ["b"]
        await b.take()
        await asyncio.sleep(0.2)
        assert await c.lapsed(0.0) == []
    finally:
        for lease in (a, b, c, d):
            await lease.close()


async def test_a_lapsed_static_member_is_removed_and_its_partitions_move_before_the_session_timeout() -> None:
    await require_postgres()
    settings = BrainSettings()
    await require_kafka(settings)
    group = f"{settings.group_id}-leases-{uuid.uuid4().hex[:8]}"  # under the brain principal's ACL prefix
    topic = INBOX

    def member(name: str):
        # 45 s: without the removal the survivor would wait that long for the dead one's partitions.
        return make_consumer(settings, topic, group_id=group, group_instance_id=f"{group}-{name}",
                             session_timeout_ms=45_000, heartbeat_interval_ms=500, rebalance_timeout_ms=3_000)

    gone, survivor = member("gone"), member("survivor")
    client = make_client(settings)
    await client.bootstrap()
    try:
        await gone.start()
        await wait_assigned(gone, settings.partitions)
        await survivor.start()
        await wait_assigned(survivor, 1)
        # A static member that stops says nothing to the group (KIP-345): its partitions stay
        # assigned to it until its session timeout, unless someone removes it.
        await gone.stop()
        await asyncio.sleep(1.0)
        assert len(survivor.assignment()) < settings.partitions
        removed_at = time.monotonic()
        answers = await remove_static_members(client, group, [f"{group}-gone"])
        assert answers == {f"{group}-gone": "NoError"}
        await wait_assigned(survivor, settings.partitions, within_s=20)
        assert time.monotonic() - removed_at < 20  # the session timeout is 45 s
        # Removing it again: the group no longer knows it, and says so for that member only.
        again = await remove_static_members(client, group, [f"{group}-gone"])
        assert again == {f"{group}-gone": "UnknownMemberIdError"}
    finally:
        await survivor.stop()
        await client.close()


async def wait_assigned(consumer, at_least: int, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        await consumer.getmany(timeout_ms=200)  # the consumer's loop runs the group protocol
        if len(consumer.assignment()) >= at_least:
            return
    raise AssertionError(f"assigned {sorted(tp.partition for tp in consumer.assignment())}, wanted {at_least}")
