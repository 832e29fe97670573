"""The brain's snapshots: one every `snapshot_every` events and one on eviction, each in the
transaction of the events before it; a wake from the newest is the fold from the first event;
one over the record limit is left out and the session goes on."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime

from aiokafka.structs import TopicPartition

from tests.fakes.archive import ArchiveOf
from tests.fakes.kafka import FakeProducer
from wakeline.contract import commands as c
from wakeline.log.chain import first_broken_seq
from wakeline.contract.codec import decode
from wakeline.contract.events import Event, SnapshotTaken, parse_event
from wakeline.log.fold import fold
from wakeline.transport.offsets import OffsetTracker
from wakeline.log.snapshots import checked_fold, resume
from wakeline.contract.tools import tool_schemas
from wakeline.contract.topics import EVENTS, INBOX, TOOL_CALLS, TOOL_RESULTS
from wakeline_brain.actor import SessionActor
from wakeline_brain.actor_deps import ActorDeps
from wakeline.agent.model import ModelReply, ModelRequest, ToolUse
from wakeline_brain.writer import PartitionWriter

INPUTS = [TopicPartition(INBOX, 0), TopicPartition(TOOL_RESULTS, 0)]


class ToolLoop:
    """A model that calls one tool per turn until told to stop."""

    name = "fake"

    async def complete(self, request: ModelRequest) -> ModelReply:
        return ModelReply(tool_uses=[ToolUse(id=f"tc-{uuid.uuid4()}", name="list_files", input={})])


class Brain:
    def __init__(self, **deps: int) -> None:
        self.producer, self.tracker = FakeProducer(), OffsetTracker()
        self.writer = PartitionWriter(0, self.producer, "wakeline-brain", self.tracker, INPUTS)
        self.archive = ArchiveOf(self.producer)  # wakes read it through the brain's SessionLoader
        self.deps, self.offset = deps, 0

    def events(self, sid: str) -> list[Event]:
        return [parse_event(s.value) for t in self.producer.committed for s in t.sent
                if s.topic == EVENTS and s.key == sid.encode()]

    def actor(self, sid: str) -> SessionActor:
        async def dead_letter(item: object, reason: str) -> None:
            raise AssertionError(reason)

        deps = ActorDeps(host="test", idle_evict_s=0.1, load=self.archive.loader().load,
                         model_for=lambda name: ToolLoop(),
                         tools=tool_schemas(), release=lambda tokens: None, dead_letter=dead_letter,
                         now=lambda: datetime.now(UTC), new_id=lambda: str(uuid.uuid4()), **self.deps)
        return SessionActor(session_id=sid, tenant="t", partition=0, writer=self.writer, deps=deps)

    async def results(self, sid: str, rounds: int, create: bool = True) -> None:
        """Creates the session, then answers its pending call `rounds` times, an actor a round."""
        if create:
            await self.run(sid, c.CreateSession(command_id=f"create-{sid}", session_id=sid, tenant="t",
                                                actor="user:ann", message="go", config={"model": "fake"}))
        for _ in range(rounds):
            [call] = fold(self.events(sid)).pending_tool_calls
            await self.run(sid, c.ToolResultReport(session_id=sid, tenant="t", tool_call_id=call.tool_call_id,
                                                   name="list_files", output="{}", runner="r1"))

    async def run(self, sid: str, item: object) -> None:
        actor = self.actor(sid)
        actor.mailbox.put_nowait((item, (INPUTS[0], self.offset)))
        self.offset += 1
        await asyncio.wait_for(actor.run("test"), timeout=10)  # returns on idle eviction
        # The archiver a few records behind: the next wake reads the archive, then the tail.
        await self.archive.archive(max(0, len(self.archive.records()) - 3))


async def test_a_snapshot_every_n_events_in_the_transaction_of_the_events_before_it():
    brain = Brain(snapshot_every=10, snapshot_on_evict_after=1000)
    await brain.writer.start()
    try:
        await brain.results("s1", rounds=8)
    finally:
        await brain.writer.close()
    events = brain.events("s1")
    snapshots = [e for e in events if isinstance(e, SnapshotTaken)]
    assert first_broken_seq(events) is None and len(snapshots) >= 3
    assert all(b.seq - a.seq <= 10 + 5 for a, b in zip(snapshots, snapshots[1:]))  # a cadence, not a pile
    assert checked_fold(events) == fold(events)  # each holds the fold of its prefix
    for snap in snapshots:
        [txn] = [t for t in brain.producer.committed if any(parse_event(s.value) == snap for s in t.sent
                                                            if s.topic == EVENTS)]
        assert parse_event(txn.sent[0].value).seq < snap.seq  # never a transaction of its own
        for call in (decode(s.value, c.ToolCallRequest.model_validate_json) for s in txn.sent if s.topic == TOOL_CALLS):
            assert call.causation_seq == snap.seq - 1  # caused by the events, not by the snapshot


async def test_eviction_leaves_a_snapshot_the_next_wake_starts_from_with_every_input_seen():
    brain = Brain(snapshot_every=1000, snapshot_on_evict_after=5)
    await brain.writer.start()
    try:
        await brain.results("s2", rounds=3)
        before = brain.events("s2")
        assert isinstance(before[-1], SnapshotTaken)  # left by the last eviction
        woken = resume((await brain.actor("s2").deps.load("s2", "t", 0)))
        assert woken == fold(before) and woken.has_seen("create-s2")
        # from the archive's snapshot, and the three records it lacks from the tail
        assert brain.archive.store.sessions["s2"].last_seq == before[-4].seq
        # A redelivered create is a no-op for a session woken from its snapshot.
        await brain.run("s2", c.CreateSession(command_id="create-s2", session_id="s2", tenant="t",
                                              actor="user:ann", message="go", config={"model": "fake"}))
    finally:
        await brain.writer.close()
    after = brain.events("s2")
    assert [e.type for e in after[len(before):]] == ["woke"]


async def test_a_redelivered_message_and_tool_result_are_no_ops_for_a_session_woken_from_its_snapshot():
    brain = Brain(snapshot_every=1000, snapshot_on_evict_after=5)
    await brain.writer.start()
    try:
        await brain.results("s5", rounds=1)
        message = c.PostMessage(command_id="m-s5", session_id="s5", tenant="t", actor="user:ann", text="more")
        await brain.run("s5", message)
        [call] = fold(brain.events("s5")).pending_tool_calls
        result = c.ToolResultReport(session_id="s5", tenant="t", tool_call_id=call.tool_call_id,
                                    name="list_files", output="{}", runner="r1")
        await brain.run("s5", result)
        before = brain.events("s5")
        assert isinstance(before[-1], SnapshotTaken) and not fold(before).has_seen(f"result:{call.tool_call_id}")
        await brain.run("s5", message)  # both again, as after a crash before their offsets were committed
        await brain.run("s5", result)
    finally:
        await brain.writer.close()
    after = brain.events("s5")
    assert [e.type for e in after[len(before):]] == ["woke", "woke"]
    assert checked_fold(after) == fold(after)


async def test_a_snapshot_over_the_record_limit_is_left_out_and_the_session_goes_on():
    brain = Brain(snapshot_every=4, snapshot_on_evict_after=4, max_record_bytes=1400)  # events fit, states not
    await brain.writer.start()
    try:
        await brain.results("s3", rounds=4)
    finally:
        await brain.writer.close()
    events = brain.events("s3")
    assert first_broken_seq(events) is None and len(events) > 12
    assert not any(isinstance(e, SnapshotTaken) for e in events)
    assert fold(events).status == "running" and len(fold(events).pending_tool_calls) == 1


async def test_a_snapshot_that_will_not_resume_costs_a_full_read_not_the_session():
    brain = Brain(snapshot_every=1000, snapshot_on_evict_after=5)
    await brain.writer.start()
    try:
        await brain.results("s4", rounds=2)
        honest = brain.events("s4")
        assert isinstance(honest[-1], SnapshotTaken)
        mangled = honest[-1].model_copy(update={"payload": honest[-1].payload.model_copy(
            update={"state": {"not": "a session state"}})})
        reads: list[bool] = []

        async def mangled_snapshot(sid: str, tenant: str, partition: int, whole: bool = False) -> list[Event]:
            reads.append(whole)
            return brain.events(sid) if whole else [mangled]

        actor = brain.actor("s4")
        actor.deps = dataclasses.replace(actor.deps, load=mangled_snapshot)
        [call] = fold(honest).pending_tool_calls
        actor.mailbox.put_nowait((c.ToolResultReport(session_id="s4", tenant="t", tool_call_id=call.tool_call_id,
                                                     name="list_files", output="{}", runner="r1"),
                                  (INPUTS[0], brain.offset)))
        await asyncio.wait_for(actor.run("test"), timeout=10)
    finally:
        await brain.writer.close()
    assert reads == [False, True]  # the snapshot first, then the whole log
    after = brain.events("s4")[len(honest):]
    assert [e.type for e in after][:2] == ["woke", "tool_result"]  # woken and carried on, nothing rejected
    assert not any(e.type == "input_rejected" for e in after)
