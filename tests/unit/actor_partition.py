"""A brain partition in memory for actor tests: a real `PartitionWriter` over a
`FakeProducer`, the offsets it commits, its dead letters, and a session's actor on it."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from datetime import UTC, datetime

from aiokafka.structs import TopicPartition

from tests.fakes.archive import ArchiveOf
from tests.fakes.kafka import FakeProducer
from wakeline.contract import commands as c
from wakeline.contract.events import Event, parse_event
from wakeline.transport.offsets import OffsetTracker
from wakeline.contract.tools import tool_schemas
from wakeline.contract.topics import EVENTS, INBOX, TOOL_RESULTS
from wakeline_brain.actor import SessionActor
from wakeline_brain.actor_deps import ActorDeps
from wakeline.agent.model import ModelReply, ModelRequest
from wakeline_brain.writer import PartitionWriter

PARTITION = 0
INPUTS = [TopicPartition(INBOX, PARTITION), TopicPartition(TOOL_RESULTS, PARTITION)]


class FakeModel:
    name = "fake"

    def __init__(self, *replies: ModelReply):
        self.replies = list(replies)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        return self.replies.pop(0)


class Partition:
    """One partition of a brain: a writer over a fake producer, and the offsets it commits."""

    def __init__(self) -> None:
        self.producer, self.tracker = FakeProducer(), OffsetTracker()
        self.writer = PartitionWriter(PARTITION, self.producer, "wakeline-brain", self.tracker, INPUTS)
        self.letters: list[tuple[object, str]] = []
        # Wakes go through the brain's SessionLoader: a memory archive (empty unless a test
        # archives) and the committed records as the tail.
        self.archive = ArchiveOf(self.producer, PARTITION)
        self._offsets = itertools.count()

    def actor(self, session_id: str, model: FakeModel, now=lambda: datetime.now(UTC), turn_slots=None,
              wake_sessions=None) -> SessionActor:
        async def dead_letter(item: object, reason: str) -> None:
            self.letters.append((item, reason))

        def release(tokens: list[tuple[TopicPartition, int]]) -> None:
            for tp, offset in tokens:
                self.tracker.finish(tp, offset)

        deps = ActorDeps(host="test", idle_evict_s=0.2, load=self.archive.loader().load, model_for=lambda name: model,
                         tools=tool_schemas(), release=release, dead_letter=dead_letter, now=now,
                         new_id=lambda: str(uuid.uuid4()), turn_slots=turn_slots, wake_sessions=wake_sessions)
        return SessionActor(session_id=session_id, tenant="t", partition=PARTITION, writer=self.writer, deps=deps)

    def deliver(self, actor: SessionActor, item: object, topic: str = INBOX) -> int:
        """Puts an input in the actor's mailbox as the router does: tracked, with its token."""
        tp, offset = TopicPartition(topic, PARTITION), next(self._offsets)
        self.tracker.add(tp, offset)
        actor.mailbox.put_nowait((item, (tp, offset)))
        return offset

    def events(self, session_id: str) -> list[Event]:
        return [parse_event(s.value) for t in self.producer.committed for s in t.sent
                if s.topic == EVENTS and s.key == session_id.encode()]

    def committed_offset(self, tp: TopicPartition) -> int | None:
        return next((t.offsets[tp] for t in reversed(self.producer.committed) if tp in t.offsets), None)


async def run_until_idle(actor: SessionActor) -> None:
    await asyncio.wait_for(actor.run("test"), timeout=10)  # returns on idle eviction


async def run_until_idle_with(part: Partition, actor: SessionActor, item: object) -> None:
    part.deliver(actor, item)
    await run_until_idle(actor)


async def eventually(condition, timeout_s: float = 3.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def create(session_id: str) -> c.CreateSession:
    return c.CreateSession(command_id=f"create-{uuid.uuid4()}", session_id=session_id, tenant="t",
                           actor="user:ann", message="list the files", config={"model": "fake"})
