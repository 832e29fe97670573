"""Tasks from any Kafka client: kcat (librdkafka) produces commands the way a user would."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from tests.e2e.sessions import wait_ended, wait_for
from tests.e2e.stored_log import assert_log_whole, pg_rows
from tests.kcat import kcat_login
from wakeline.transport.kafka_io import kafka_auth
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import INBOX, partition_for


def kcat_produce(value: str, key: str | None = None, partition: int | None = None) -> None:
    """-X topic.partitioner=murmur2_random is librdkafka's Java-compatible partitioner. It logs in
    as the gateway, the principal that may write the inbox (any producer of commands would)."""
    args = ["kcat", "-P", "-b", CommonSettings().kafka_bootstrap, *kcat_login("gateway"), "-t", INBOX,
            "-X", "topic.partitioner=murmur2_random"]
    if key is not None:
        args += ["-K", "\t"]
        value = f"{key}\t{value}"
    if partition is not None:
        args += ["-p", str(partition)]
    subprocess.run(args, input=value.encode(), check=True, timeout=30)


def create_command(session_id: str, policy: str = "tools3") -> str:
    return json.dumps({"type": "create_session", "command_id": str(uuid.uuid4()), "session_id": session_id,
                       "tenant": "default", "actor": "user:kcat", "message": "from kcat",
                       "config": {"model": f"scripted:{policy}"}})


def test_command_from_a_plain_kafka_producer_is_served(stack, client, auditor):
    sid = str(uuid.uuid4())
    kcat_produce(create_command(sid), key=sid)
    wait_for(lambda: auditor.get(f"/v1/sessions/{sid}").status_code == 200, 60, "the session to exist", stack)
    assert wait_ended(auditor, stack, sid)["ended_reason"] == "completed"
    assert assert_log_whole(sid)[0].actor == "user:kcat"
    # Owned by user:kcat: the stack's user key (user:local) does not see it at all.
    assert client.get(f"/v1/sessions/{sid}").status_code == 404


def test_command_on_the_wrong_partition_is_rerouted_and_sequenced_once(stack, auditor):
    """Only the misplaced record is sent, so the session can exist only through the brain
    re-producing it: the copy is found on the right partition, and the session ran once."""
    sid = str(uuid.uuid4())
    partitions = CommonSettings().partitions
    right = TopicPartition(INBOX, partition_for(sid, partitions))
    wrong = (right.partition + 1) % partitions
    before = asyncio.run(inbox_end(right))
    command = create_command(sid)
    kcat_produce(command, key=sid, partition=wrong)
    assert wait_ended(auditor, stack, sid)["ended_reason"] == "completed"
    rerouted = [r for r in asyncio.run(inbox_records_from(right, before)) if r.key == sid.encode()]
    assert [r.value for r in rerouted] == [command.encode()], rerouted
    events = assert_log_whole(sid)
    assert [e.type for e in events].count("session_created") == 1


async def inbox_end(tp: TopicPartition) -> int:
    reader = inbox_reader()
    await reader.start()
    try:
        return (await reader.end_offsets([tp]))[tp]
    finally:
        await reader.stop()


async def inbox_records_from(tp: TopicPartition, offset: int) -> list[ConsumerRecord]:
    """The committed records of `tp` from `offset` to its end as it is now."""
    reader = inbox_reader()
    await reader.start()
    found: list[ConsumerRecord] = []
    try:
        end = (await reader.end_offsets([tp]))[tp]
        reader.assign([tp])
        reader.seek(tp, offset)
        async with asyncio.timeout(30):
            while (await reader.position(tp)) < end:
                found += (await reader.getmany(tp, timeout_ms=1_000)).get(tp, [])
    finally:
        await reader.stop()
    return found


def inbox_reader() -> AIOKafkaConsumer:
    settings = CommonSettings()  # the suite's principal (admin): reads any topic
    return AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings),
                            isolation_level="read_committed", enable_auto_commit=False)


def test_malformed_records_go_to_the_dead_letter_topic_and_services_keep_serving(stack, auditor):
    marker = f"garbage-{uuid.uuid4()}"
    kcat_produce(f"not json at all {marker}", key=marker)
    kcat_produce(json.dumps({"type": "post_message", "session_id": marker}), key=marker)
    def both_letters():
        rows = pg_rows("SELECT reason, value FROM dead_letters WHERE value LIKE $1", f"%{marker}%")
        return rows if len(rows) >= 2 else None
    letters = wait_for(both_letters, 60, "both dead letters to be archived", stack)
    assert len(letters) == 2 and all(row["reason"] for row in letters)
    sid = str(uuid.uuid4())
    kcat_produce(create_command(sid), key=sid)
    wait_for(lambda: auditor.get(f"/v1/sessions/{sid}").status_code == 200, 60, "the next session", stack)
    assert wait_ended(auditor, stack, sid)["ended_reason"] == "completed"
    assert all(s.alive for s in stack.services.values()), stack.report()
