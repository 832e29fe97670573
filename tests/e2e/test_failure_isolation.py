"""Bad or merely large input stays with its session: the partition, the brain and every
other session keep going. Each test ends by counting sessions on the same partition that
still complete."""

from __future__ import annotations

import asyncio
import json
import uuid

from aiokafka import AIOKafkaProducer

from tests.e2e.inbox_records import SETTINGS, assert_partition_serves, create, ids_on, produce
from tests.e2e.sessions import wait_ended, wait_for
from tests.e2e.stored_log import assert_log_whole, pg_rows, stored_events
from wakeline.contract import commands as c
from wakeline.contract.codec import encode
from wakeline.transport.kafka_io import kafka_auth
from wakeline.contract.topics import BRAIN_GROUP, partition_for, record_key

def rejections(sid: str) -> list:
    return [e.payload for e in stored_events(sid) if e.type == "input_rejected"]


def test_an_oversized_multibyte_message_from_kafka_is_rejected_and_its_partition_keeps_serving(stack, auditor):
    sid = str(uuid.uuid4())
    partition = partition_for(sid, SETTINGS.partitions)
    produce([(record_key(sid), encode(create(sid)))], partition)
    wait_ended(auditor, stack, sid)
    # Over max_record_bytes once the brain wraps it in an event, under the broker's limit.
    text = "é" * 48_100 + "a" * (SETTINGS.max_record_bytes - 96_200 + 5_000)
    big = c.PostMessage(command_id=str(uuid.uuid4()), session_id=sid, tenant="default", actor="user:e2e-kafka",
                        text=text)
    produce([(record_key(sid), encode(big))], partition)
    rejected = wait_for(lambda: rejections(sid), 60, "the rejection", stack)
    assert [(r.code, r.command_id) for r in rejected] == [("too_large", big.command_id)]
    letters = wait_for(lambda: pg_rows("SELECT reason FROM dead_letters WHERE value LIKE $1",
                                       f"%{big.command_id}%"), 60, "the dead letter", stack)
    assert "too_large" in letters[0]["reason"]
    assert_partition_serves(stack, auditor, partition)


def test_ids_with_nul_control_characters_or_over_200_chars_are_dead_lettered(stack, auditor):
    partition = 0
    bad = [("nul\x00id", "default"), ("x" * 201, "default"), ("line\nbreak", "default"), ("ok-id", "ten\x00ant")]
    markers = []
    for sid, tenant in bad:
        marker = str(uuid.uuid4())
        markers.append(marker)
        value = json.dumps({"type": "create_session", "command_id": marker, "session_id": sid, "tenant": tenant,
                            "actor": "user:e2e-kafka", "message": "go"}).encode()
        produce([(sid.encode(), value)], partition)
    for marker in markers:
        wait_for(lambda: pg_rows("SELECT 1 FROM dead_letters WHERE value LIKE $1", f"%{marker}%"), 60,
                 f"the dead letter of {marker}", stack)
    assert_partition_serves(stack, auditor, partition)


def test_a_session_id_of_another_tenant_is_refused_never_sequenced_twice(stack, auditor):
    sid = str(uuid.uuid4())
    partition = partition_for(sid, SETTINGS.partitions)
    produce([(record_key(sid), encode(create(sid)))], partition)
    wait_ended(auditor, stack, sid)
    intruder = create(sid, tenant="other-tenant")
    produce([(record_key(sid), encode(intruder))], partition)
    rejected = wait_for(lambda: rejections(sid), 60, "the rejection", stack)
    assert [(r.code, r.command_id) for r in rejected] == [("wrong_tenant", intruder.command_id)]
    assert pg_rows("SELECT 1 FROM events WHERE session_id = $1", sid, tenant="other-tenant") == []
    events = assert_log_whole(sid)
    assert [e.type for e in events].count("session_created") == 1
    assert_partition_serves(stack, auditor, partition)


def test_a_fenced_partition_writer_is_replaced_and_its_sessions_wake_and_complete(stack, auditor):
    partition = 2
    sid = ids_on(partition, 1)[0]
    produce([(record_key(sid), encode(create(sid, policy="slowmodel")))], partition)
    wait_for(lambda: any(e.type == "turn_started" for e in stored_events(sid)), 60, "the slow turn to start", stack)

    async def fence():
        # The same transactional id as the brain's writer of this partition: starting it
        # fences the brain's producer, as a zombie or a second brain would.
        producer = AIOKafkaProducer(bootstrap_servers=SETTINGS.kafka_bootstrap, **kafka_auth(SETTINGS),
                                    enable_idempotence=True,
                                    transactional_id=f"{BRAIN_GROUP}-p{partition}")
        await producer.start()
        await producer.stop()
    asyncio.run(fence())
    assert_partition_serves(stack, auditor, partition)
    # the session that was mid-turn is woken from the log by the new writer and finishes
    assert wait_ended(auditor, stack, sid, timeout=120)["ended_reason"] == "completed"
    events = assert_log_whole(sid)
    assert any(e.type == "woke" for e in events)
    log = stack.services["brain"].log.read_text(errors="replace")
    assert f"partition {partition}: writer lost; acquiring it again" in log


def test_an_oversized_record_on_the_wrong_partition_is_dead_lettered_not_rerouted_forever(stack, auditor):
    sid = str(uuid.uuid4())
    right = partition_for(sid, SETTINGS.partitions)
    wrong = (right + 1) % SETTINGS.partitions
    big = c.PostMessage(command_id=str(uuid.uuid4()), session_id=sid, tenant="default", actor="user:e2e-kafka",
                        text="é" * (SETTINGS.max_record_bytes // 2 + 4_000))  # over the limit, under the topic's
    produce([(record_key(sid), encode(big))], wrong)
    letters = wait_for(lambda: pg_rows("SELECT reason FROM dead_letters WHERE value LIKE $1",
                                       f"%{big.command_id}%"), 60, "the dead letter", stack)
    # Refused where it landed: a topic made with a larger max.message.bytes than ours can
    # hold a record our producer cannot re-send, which would fail the transaction forever.
    assert [row["reason"].split(":")[0] for row in letters] == ["too_large"]
    assert "wrong partition" in letters[0]["reason"]
    assert_partition_serves(stack, auditor, wrong)
