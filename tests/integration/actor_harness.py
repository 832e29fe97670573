"""One brain partition in process for tests that drive a `SessionActor` with a real model
adapter: a `PartitionWriter` over `FakeProducer`, the offsets it commits, and waits.
(tests/unit/test_brain_actor.py drives the same pieces with a fake model.)"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from datetime import UTC, datetime

from aiokafka.structs import TopicPartition

from tests.fakes.kafka import FakeProducer
from wakeline.contract.events import Event, parse_event
from wakeline.transport.offsets import OffsetTracker
from wakeline.contract.tools import tool_schemas
from wakeline.contract.topics import EVENTS, INBOX, TOOL_RESULTS
from wakeline_brain.actor import SessionActor
from wakeline_brain.actor_deps import ActorDeps
from wakeline.agent.model import Model
from wakeline_brain.writer import PartitionWriter

PARTITION = 0
INPUTS = [TopicPartition(INBOX, PARTITION), TopicPartition(TOOL_RESULTS, PARTITION)]


class Partition:
    def __init__(self) -> None:
        self.producer, self.tracker = FakeProducer(), OffsetTracker()
        self.writer = PartitionWriter(PARTITION, self.producer, "wakeline-brain", self.tracker, INPUTS)
        self.letters: list[tuple[object, str]] = []
        self._offsets = itertools.count()

    def actor(self, session_id: str, model: Model) -> SessionActor:
        async def dead_letter(item: object, reason: str) -> None:
            self.letters.append((item, reason))

        async def history(sid: str, tenant: str, partition: int, whole: bool = False) -> list[Event]:
            return self.events(sid)

        def release(tokens: list[tuple[TopicPartition, int]]) -> None:
            for tp, offset in tokens:
                self.tracker.finish(tp, offset)

        deps = ActorDeps(host="test", idle_evict_s=0.2, load=history, model_for=lambda name: model,
                         tools=tool_schemas(), release=release, dead_letter=dead_letter,
                         now=lambda: datetime.now(UTC), new_id=lambda: str(uuid.uuid4()))
        return SessionActor(session_id=session_id, tenant="t", partition=PARTITION, writer=self.writer, deps=deps)

    def deliver(self, actor: SessionActor, item: object, topic: str = INBOX) -> int:
        """Puts `item` in the actor's mailbox as the record at the returned offset."""
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
    await asyncio.wait_for(actor.run("test"), timeout=20)  # returns on idle eviction


async def eventually(condition, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)
