"""Commands a Kafka client sends straight to the inbox are counted against their tenant's rate
quotas by the brain, those the gateway sent (and counted) are not: the router's choice by
the `wakeline-admitted` header, the actor's count and what a refusal records, the pure
rules under them, and the one definition of the defaults. Against real Kafka and Postgres:
tests/integration/test_kafka_quotas.py."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

from aiokafka.structs import ConsumerRecord, TopicPartition

from tests.fakes.kafka import FakeProducer
from tests.unit.folded_log import Log
from wakeline.agent.inputs import handle_input
from wakeline.agent.model import ModelReply
from wakeline.agent.quota_refusals import counted, refusal_reason, refused_drafts
from wakeline.contract import commands as c
from wakeline.contract import topics
from wakeline.contract.codec import encode
from wakeline.contract.events import parse_event
from wakeline.contract.quotas import ADMITTED_HEADER, Refusal
from wakeline_brain.actor import SessionActor
from wakeline_brain.actor_deps import ActorDeps
from wakeline_brain.mail import Uncounted
from wakeline_brain.router import Brain
from wakeline_brain.settings import BrainSettings
from wakeline_brain.writer import PartitionWriter
from wakeline_gateway.inbox import Inbox
from wakeline_gateway.settings import GatewaySettings

FULL = Refusal("commands_per_second", 3, 0, 3, 1, 0.5)
ADMITTED = [(ADMITTED_HEADER, b"gateway")]


def create(sid: str = "s1", tenant: str = "t") -> c.CreateSession:
    return c.CreateSession(command_id=f"create-{uuid.uuid4()}", session_id=sid, tenant=tenant, actor="user:ann",
                           config={"model": "fake"})


def post(text: str, tenant: str = "t") -> c.PostMessage:
    return c.PostMessage(command_id=f"post-{uuid.uuid4()}", session_id="s1", tenant=tenant, actor="user:ann",
                         text=text)


# -- the pure rules ------------------------------------------------------------------------

def test_a_command_the_session_has_or_one_for_another_tenants_session_is_not_counted() -> None:
    log = Log()
    made = create()
    assert counted(log.state, made)  # a new session: counted against the tenant it names
    log.append(handle_input(log.state, made), "s1")
    assert not counted(log.state, made)  # redelivered after a crash: counted once
    assert counted(log.state, post("hi"))
    assert not counted(log.state, post("hi", tenant="other"))  # refused wrong_tenant, at no cost


def test_a_refusal_names_the_quota_and_limit_and_is_recorded_only_in_a_session_that_exists() -> None:
    log = Log()
    made = create()
    reason = refusal_reason(log.state, made, FULL)
    assert reason == ("tenant 't' is over its quota of 3 commands per second; the session was not created: "
                      "send the same command again in 1 s")
    assert refused_drafts(log.state, made, reason) == []  # no session to record it in: dead-lettered only
    log.append(handle_input(log.state, made), "s1")
    message = post("hi")
    reason = refusal_reason(log.state, message, FULL)
    assert reason.endswith("not handled: send it again as a new command in 1 s")
    [draft] = refused_drafts(log.state, message, reason)
    assert (draft.type, draft.payload.code, draft.payload.reason, draft.causation_id) == (
        "input_rejected", "quota_exceeded", reason, message.command_id)
    log.append([draft], "s1")
    assert refused_drafts(log.state, message, reason) == []  # recorded once


def test_the_brain_and_the_gateway_default_to_the_same_quotas(monkeypatch) -> None:
    assert BrainSettings().quota_defaults() == GatewaySettings().quota_defaults()
    monkeypatch.setenv("WAKELINE_QUOTA_COMMANDS_PER_SECOND", "unlimited")
    monkeypatch.setenv("WAKELINE_QUOTA_SESSIONS_PER_MINUTE", "9")
    assert BrainSettings().quota_defaults() == GatewaySettings().quota_defaults()
    assert (BrainSettings().quota_commands_per_second, BrainSettings().quota_sessions_per_minute) == (None, 9)


# -- the gateway marks what it sends -------------------------------------------------------

async def test_the_gateway_marks_every_command_it_sends_admitted() -> None:
    producer = FakeProducer()
    await Inbox(producer, 6).submit(post("hi"))  # type: ignore[arg-type]
    [sent] = producer.acked
    assert sent.topic == topics.INBOX and (ADMITTED_HEADER, b"gateway") in sent.headers


# -- the router: which commands are counted ------------------------------------------------

async def _dispatched(command: c.CommandBase, headers: list[tuple[str, bytes]], wrong_partition: bool = False):
    """The brain's router after one inbox record: (what the session's mailbox got, the producer)."""
    settings = BrainSettings()
    producer = FakeProducer()
    brain = Brain(settings, load=None, model_for=None, tools=[], new_producer=lambda p: producer)
    right = topics.partition_for(command.session_id, settings.partitions)
    partition = (right + 1) % settings.partitions if wrong_partition else right
    inputs = [TopicPartition(t, partition) for t in (topics.INBOX, topics.TOOL_RESULTS)]
    writer = PartitionWriter(partition, producer, settings.group_id, brain.tracker, inputs, offsets_every_s=0)
    await writer.start()
    brain.writers[partition] = writer
    value = encode(command)
    brain.dispatch(ConsumerRecord(topics.INBOX, partition, 7, 0, 0, topics.record_key(command.session_id), value,
                                  None, 0, len(value), headers))
    mail = None
    if command.session_id in brain.actors:
        actor, task = brain.actors[command.session_id]
        mail = actor.mailbox.get_nowait()[0]
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    else:
        async with asyncio.timeout(5):
            while not producer.committed:
                await asyncio.sleep(0.01)
    await writer.close()
    return mail, producer


async def test_a_command_from_another_kafka_client_goes_to_its_session_to_be_counted() -> None:
    message = post("hi")
    mail, _ = await _dispatched(message, [("traceparent", b"00-x")])
    assert mail == Uncounted(message)


async def test_a_command_the_gateway_admitted_or_a_tool_result_is_not_counted_again() -> None:
    message = post("hi")
    assert (await _dispatched(message, ADMITTED))[0] == message
    result = c.SubmitToolResult(command_id="r", session_id="s1", tenant="t", tool_call_id="tc", output="ok")
    assert (await _dispatched(result, []))[0] == result  # answers a call the session made: never counted


async def test_a_re_routed_command_keeps_its_headers_so_it_is_counted_once_where_it_lands() -> None:
    message = post("hi")
    mail, producer = await _dispatched(message, ADMITTED, wrong_partition=True)
    assert mail is None  # not handled here: re-routed, uncounted
    [moved] = [s for t in producer.committed for s in t.sent if s.topic == topics.INBOX]
    assert moved.partition == topics.partition_for("s1", BrainSettings().partitions)
    assert (ADMITTED_HEADER, b"gateway") in moved.headers


# -- the actor: counts, refuses, records ---------------------------------------------------

class FakeWriter:
    partition = 0

    def __init__(self) -> None:
        self.records: list = []

    async def append(self, records) -> None:
        self.records.extend(records)

    def events(self):
        return [parse_event(r.value) for r in self.records if r.topic == topics.EVENTS]


class Counts:
    """Admits `room` commands, then refuses every one (FULL); records what it was asked."""

    def __init__(self, room: int):
        self.room, self.asked = room, []

    async def admit(self, command: c.CommandBase) -> Refusal | None:
        self.asked.append(command.command_id)
        self.room -= 1
        return None if self.room >= 0 else FULL


class FakeModel:
    name = "fake"

    async def complete(self, request):
        return ModelReply(text="ok")


def make_actor(counts: Counts):
    writer, letters, released = FakeWriter(), [], []

    async def dead_letter(item, reason):
        letters.append((item, reason))

    async def own_history(session_id, tenant, partition, whole=False):
        return writer.events()

    deps = ActorDeps(host="test", idle_evict_s=0.2, load=own_history, model_for=lambda name: FakeModel(),
                     tools=[], release=released.extend, dead_letter=dead_letter,
                     now=lambda: datetime.now(UTC), new_id=lambda: str(uuid.uuid4()), admit=counts.admit)
    actor = SessionActor(session_id="s1", tenant="t", partition=0, writer=writer, deps=deps)  # type: ignore[arg-type]
    return actor, writer, letters, released


async def run_with(actor: SessionActor, *items) -> None:
    for token, item in enumerate(items):
        actor.mailbox.put_nowait((item, token))
    await asyncio.wait_for(actor.run("test"), timeout=10)  # returns on idle eviction


async def test_a_kafka_command_over_quota_is_rejected_in_its_session_and_dead_lettered() -> None:
    counts = Counts(room=2)
    actor, writer, letters, released = make_actor(counts)
    made, first, second = create(), post("one"), post("two")
    await run_with(actor, Uncounted(made), Uncounted(first), Uncounted(second))
    events = writer.events()
    assert [e.payload.text for e in events if e.type == "user_message"] == ["one"]
    [rejected] = [e for e in events if e.type == "input_rejected"]
    assert (rejected.payload.code, rejected.causation_id) == ("quota_exceeded", second.command_id)
    assert "over its quota of 3 commands per second" in rejected.payload.reason
    assert [(item.command_id, reason.split(":")[0]) for item, reason in letters] == [
        (second.command_id, "quota_exceeded")]
    assert letters[0][1] == f"quota_exceeded: {rejected.payload.reason}"
    assert sorted(released) == [0, 1, 2]  # every input settled, none left to redeliver


async def test_a_create_over_quota_creates_nothing_and_the_same_command_later_creates_the_session() -> None:
    counts = Counts(room=0)
    actor, writer, letters, released = make_actor(counts)
    made = create()
    await run_with(actor, Uncounted(made))
    assert writer.events() == [] and released == [0]
    assert [(item, reason.startswith("quota_exceeded: tenant 't' is over")) for item, reason in letters] == [
        (made, True)]
    counts.room = 1
    await run_with(actor, Uncounted(made))  # sent again once there is room: the same command_id will do
    assert [e.type for e in writer.events()][0] == "session_created"


async def test_commands_the_gateway_counted_and_redeliveries_are_not_counted() -> None:
    counts = Counts(room=1)
    actor, writer, letters, _ = make_actor(counts)
    made, message = create(), post("one")
    await run_with(actor, Uncounted(made), message, Uncounted(made))  # the create redelivered, uncounted
    assert counts.asked == [made.command_id]
    assert [e.type for e in writer.events()].count("session_created") == 1 and letters == []
    assert not [e for e in writer.events() if e.type == "input_rejected"]


async def test_a_command_for_another_tenants_session_is_refused_wrong_tenant_uncounted() -> None:
    counts = Counts(room=1)
    actor, writer, _, _ = make_actor(counts)
    made, foreign = create(), post("let me in", tenant="other")
    await run_with(actor, Uncounted(made), Uncounted(foreign))
    assert counts.asked == [made.command_id]
    assert [e.payload.code for e in writer.events() if e.type == "input_rejected"] == ["wrong_tenant"]
