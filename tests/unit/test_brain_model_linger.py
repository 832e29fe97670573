"""A model call starts from the sealed state, before its transaction commits, and a reply
within `model_linger_s` rides in that same transaction (sequencer.Sequencer.advance).
Over a real `PartitionWriter` whose producer is a `FakeProducer`: what each transaction
holds is what a crash could leave."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from aiokafka.errors import ProducerFenced

from tests.unit.actor_partition import INPUTS, FakeModel, Partition, create, eventually, run_until_idle
from wakeline.contract import commands as c
from wakeline.log.chain import first_broken_seq
from wakeline.contract.events import parse_event
from wakeline.contract.topics import EVENTS, TOOL_CALLS, TOOL_RESULTS
from wakeline.agent.model import ModelReply, ModelRequest, ToolUse
from wakeline_brain.writer import WriterClosed


def lingering(actor, seconds: float):
    actor.deps = dataclasses.replace(actor.deps, model_linger_s=seconds)
    return actor


class SlowModel(FakeModel):
    def __init__(self, delay_s: float, *replies: ModelReply):
        super().__init__(*replies)
        self.delay_s = delay_s
        self.cancelled = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        try:
            await asyncio.sleep(self.delay_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return await super().complete(request)


def tool_round(call_id: str) -> ModelReply:
    return ModelReply(tool_uses=[ToolUse(id=call_id, name="list_files", input={})])


def result(call_id: str) -> c.ToolResultReport:
    return c.ToolResultReport(session_id="s1", tenant="t", tool_call_id=call_id, name="list_files",
                              output='{"entries": []}', runner="r1")


def types_per_transaction(part: Partition) -> list[list[str]]:
    return [[parse_event(s.value).type if s.topic == EVENTS else s.topic for s in t.sent]
            for t in part.producer.committed if t.sent]


async def test_a_reply_within_the_linger_rides_in_the_tool_results_transaction_with_the_call_it_makes():
    part = Partition()
    await part.writer.start()
    try:
        actor = lingering(part.actor("s1", FakeModel(tool_round("tc-1"), tool_round("tc-2"), ModelReply(text="done"))),
                          0.5)
        part.deliver(actor, create("s1"))
        running = asyncio.create_task(actor.run("test"))
        await eventually(lambda: any(s.topic == TOOL_CALLS for t in part.producer.committed for s in t.sent))
        part.deliver(actor, result("tc-1"), TOOL_RESULTS)
        await eventually(lambda: sum(s.topic == TOOL_CALLS for t in part.producer.committed for s in t.sent) == 2)
        part.deliver(actor, result("tc-2"), TOOL_RESULTS)
        await asyncio.wait_for(running, 10)
    finally:
        await part.writer.close()
    events = part.events("s1")
    assert first_broken_seq(events) is None
    # One transaction per step: the input, the steps after it, the reply they led to and
    # the call that reply makes (a tool result ends its turn and the next one starts).
    assert types_per_transaction(part) == [
        ["session_created", "user_message", "turn_started", "model_turn", "tool_call", TOOL_CALLS],
        ["tool_result", "turn_ended", "turn_started", "model_turn", "tool_call", TOOL_CALLS],
        ["tool_result", "turn_ended", "turn_started", "model_turn", "turn_ended", "session_ended"]]


async def test_a_reply_slower_than_the_linger_comes_in_a_transaction_of_its_own():
    part = Partition()
    await part.writer.start()
    try:
        model = SlowModel(0.2, ModelReply(text="late"))
        actor = lingering(part.actor("s1", model), 0.01)
        part.deliver(actor, create("s1"))
        await run_until_idle(actor)
    finally:
        await part.writer.close()
    assert types_per_transaction(part) == [
        ["session_created", "user_message", "turn_started"],
        ["model_turn", "turn_ended", "session_ended"]]
    assert model.cancelled == 0


async def test_the_call_started_before_a_transaction_that_fails_is_cancelled_and_nothing_of_it_is_written():
    part = Partition()
    await part.writer.start()
    model = SlowModel(5.0, ModelReply(text="never"))
    actor = lingering(part.actor("s1", model), 0.01)
    part.producer.fail_commit = ProducerFenced()
    part.deliver(actor, create("s1"))
    try:
        with pytest.raises(WriterClosed):
            await asyncio.wait_for(actor.run("test"), 10)
        await eventually(lambda: model.cancelled == 1)
    finally:
        await part.writer.close()
    assert [t.sent for t in part.producer.committed if t.sent] == [] and model.requests == []
    assert part.committed_offset(INPUTS[0]) in (None, 0)  # the input is read again



async def test_an_actor_cancelled_while_it_lingers_cancels_the_call_it_started():
    """A revoked partition cancels its actors; a call started for a state never committed
    must not run on (a Claude call would be paid for and thrown away)."""
    part = Partition()
    await part.writer.start()
    model = SlowModel(5.0, ModelReply(text="never"))
    actor = lingering(part.actor("s1", model), 2.0)
    part.deliver(actor, create("s1"))
    running = asyncio.create_task(actor.run("test"))
    try:
        await asyncio.sleep(0.2)  # inside the linger: the call is running, nothing is written
        assert part.producer.committed == []
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await eventually(lambda: model.cancelled == 1)
    finally:
        await part.writer.close()
    assert [t.sent for t in part.producer.committed if t.sent] == [] and model.requests == []
    assert part.committed_offset(INPUTS[0]) in (None, 0)  # the input is read again
