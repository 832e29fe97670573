"""`SessionActor` over a real `PartitionWriter` whose producer is a `FakeProducer`: inputs in,
sealed events and tool calls out in the partition's transactions, offsets released into
the same tracker the writer commits from. The real brain, with real Kafka and Postgres,
is covered in tests/e2e/test_session_loop.py and tests/e2e/test_failure_isolation.py.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from datetime import UTC, datetime


from wakeline.contract import commands as c
from wakeline.log.chain import first_broken_seq
from wakeline.contract.codec import decode
from wakeline.contract.events import InputRejected, SessionEnded, ToolCallRequested, parse_event
from wakeline.contract.topics import EVENTS, TOOL_CALLS, TOOL_RESULTS
from wakeline.agent.model import ModelReply, ToolUse
from tests.unit.actor_partition import (  # noqa: F401  (the harness the tests below share)
    INPUTS, PARTITION, FakeModel, Partition, create, eventually, run_until_idle, run_until_idle_with,
)

async def test_an_input_is_sealed_into_the_log_and_its_tool_call_issued_in_the_same_transaction():
    part = Partition()
    await part.writer.start()
    try:
        model = FakeModel(ModelReply(tool_uses=[ToolUse(id="tc-1", name="list_files", input={})]),
                          ModelReply(text="one file"))
        actor = part.actor("s1", model)
        await run_until_idle_with(part, actor, create("s1"))  # evicted once the call is out
        report = c.ToolResultReport(session_id="s1", tenant="t", tool_call_id="tc-1", name="list_files",
                                    output='{"entries": []}', runner="r1")
        part.deliver(actor, report, TOOL_RESULTS)
        await run_until_idle(actor)  # woken by the result: a `woke` marker, then the next turn
        await eventually(lambda: part.committed_offset(INPUTS[1]) == 2)
    finally:
        await part.writer.close()
    events = part.events("s1")
    assert first_broken_seq(events) is None and [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.type for e in events] == [
        "session_created", "user_message", "turn_started", "model_turn", "tool_call",
        "woke", "tool_result", "turn_ended", "turn_started", "model_turn", "turn_ended", "session_ended"]
    assert [m["name"] for m in model.requests[0].tools] == ["bash", "read_file", "write_file", "list_files"]
    # The call goes to the runners in the transaction that records it, and nowhere else.
    [issuing] = [t for t in part.producer.committed if any(s.topic == TOOL_CALLS for s in t.sent)]
    in_log = [parse_event(s.value) for s in issuing.sent if s.topic == EVENTS]
    assert any(isinstance(e, ToolCallRequested) and e.payload.tool_call_id == "tc-1" for e in in_log)
    [call] = [decode(s.value, c.ToolCallRequest.model_validate_json) for s in issuing.sent if s.topic == TOOL_CALLS]
    assert (call.tool_call_id, call.name, call.causation_seq) == ("tc-1", "list_files", 5)
    # Both inputs are released once the session waits again; the writer commits past them.
    assert part.committed_offset(INPUTS[0]) == 1 and part.committed_offset(INPUTS[1]) == 2
    assert part.letters == []


def failing_once_at(call: int, clock=lambda: datetime.now(UTC)):
    """A clock that raises on its `call`-th reading: a bug while an input is being handled."""
    readings = itertools.count(1)

    def now() -> datetime:
        if next(readings) == call:
            raise RuntimeError("clock broke")
        return clock()
    return now


async def test_a_failing_handler_parks_its_session_and_the_partitions_other_session_goes_on():
    part = Partition()
    await part.writer.start()
    try:
        await run_until_idle_with(part, part.actor("s-bad", FakeModel(ModelReply(text="first"))), create("s-bad"))
        # Woken again, the marker seals (reading 1); sealing the message (reading 2) fails.
        bad = part.actor("s-bad", FakeModel(), now=failing_once_at(2))
        message = c.PostMessage(command_id=f"post-{uuid.uuid4()}", session_id="s-bad", tenant="t",
                                actor="user:ann", text="boom")
        part.deliver(bad, message)
        good = part.actor("s-good", FakeModel(ModelReply(text="fine")))
        part.deliver(good, create("s-good"))
        await asyncio.gather(run_until_idle(bad), run_until_idle(good))
        await eventually(lambda: part.committed_offset(INPUTS[0]) == 3)
    finally:
        await part.writer.close()
    bad_events, good_events = part.events("s-bad"), part.events("s-good")
    [rejected] = [e for e in bad_events if isinstance(e, InputRejected)]
    assert (rejected.payload.code, rejected.causation_id) == ("internal_error", message.command_id)
    assert "clock broke" in rejected.payload.reason
    assert [item for item, _ in part.letters] == [message]  # dead-lettered once, with its code
    assert part.letters[0][1].startswith("internal_error: ")
    assert [e.payload.reason for e in good_events if isinstance(e, SessionEnded)] == ["completed"]
    assert first_broken_seq(bad_events) is None and first_broken_seq(good_events) is None
    # The partition never stopped: every transaction committed, every input's offset passed.
    assert all(t.outcome == "committed" for t in part.producer.transactions)
