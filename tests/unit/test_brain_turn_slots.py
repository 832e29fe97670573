"""The running-sessions quota at the actor (issue 34): a turn that finds its tenant's slots
taken records `turn_queued` and waits `queued`; the slot given back at another turn's end is
granted to it, the brain wakes it, and its turn starts. Over a real `PartitionWriter` on a
fake producer, with the slots in memory under the rules Postgres keeps (migration 0027,
covered on Postgres in tests/integration/test_turn_slots.py)."""

from __future__ import annotations

import uuid

from wakeline.agent.model import ModelReply, ToolUse
from wakeline.agent.replay_check import first_divergence
from wakeline.contract import commands as c
from wakeline.contract.tools import tool_schemas
from wakeline.log.chain import first_broken_seq
from wakeline.log.fold import fold
from wakeline.storage.turn_slots import MemoryTurnSlots
from tests.unit.actor_partition import FakeModel, Partition, create, eventually, run_until_idle
from wakeline.contract.topics import TOOL_RESULTS


def listed(call_id: str) -> c.ToolResultReport:
    """The runner's answer to session s1's `list_files` call `call_id`."""
    return c.ToolResultReport(session_id="s1", tenant="t", tool_call_id=call_id, name="list_files",
                              output='{"entries": []}', runner="r1")


def wake(session_id: str) -> c.WakeSession:
    return c.WakeSession(command_id=f"wake-{uuid.uuid4()}", session_id=session_id, tenant="t", actor="system:brain")


async def test_a_turn_over_the_quota_waits_queued_and_starts_when_the_slot_is_given_back():
    slots = MemoryTurnSlots(limits={"t": 1})
    woken: list[tuple[str, tuple[str, ...]]] = []

    async def wake_sessions(tenant, ids):
        woken.append((tenant, tuple(ids)))

    part = Partition()
    await part.writer.start()
    try:
        first = part.actor("s1", FakeModel(ModelReply(tool_uses=[ToolUse(id="tc-1", name="list_files", input={})]),
                                           ModelReply(text="done")), turn_slots=slots, wake_sessions=wake_sessions)
        part.deliver(first, create("s1"))
        await run_until_idle(first)  # in its turn, waiting for the runner: it holds the slot
        second = part.actor("s2", FakeModel(ModelReply(text="hello")), turn_slots=slots, wake_sessions=wake_sessions)
        part.deliver(second, create("s2"))
        await run_until_idle(second)
        assert fold(part.events("s2")).status == "queued"
        assert [e.type for e in part.events("s2")] == ["session_created", "user_message", "turn_queued"]
        queued = part.events("s2")[-1].payload
        assert (queued.turn, queued.running, queued.limit) == (1, 1, 1)
        # A wake while the slot is still taken records nothing new: one turn_queued per wait.
        part.deliver(second, wake("s2"))
        await run_until_idle(second)
        assert [e.type for e in part.events("s2") if e.type != "woke"][-1] == "turn_queued" and woken == []

        part.deliver(first, listed("tc-1"), TOOL_RESULTS)
        await run_until_idle(first)
        assert fold(part.events("s1")).status == "ended"
        assert woken == [("t", ("s2",))]  # granted at s1's end, in its absence: owed a wake

        part.deliver(second, wake("s2"))
        await run_until_idle(second)
        await eventually(lambda: fold(part.events("s2")).status == "ended")
    finally:
        await part.writer.close()
    events = part.events("s2")
    assert first_broken_seq(events) is None
    assert [e.type for e in events if e.type != "woke"] == [
        "session_created", "user_message", "turn_queued", "turn_started", "model_turn", "turn_ended", "session_ended"]
    assert slots.tenants["t"].slots == {} and not slots.tenants["t"].queue  # both given back
    assert first_divergence(events, tool_schemas()) is None  # the replay check takes the wait as recorded


async def test_sessions_wait_in_arrival_order_and_another_tenant_never_waits_for_them():
    slots = MemoryTurnSlots(limits={"t": 1})
    part = Partition()
    await part.writer.start()
    try:
        holder = part.actor("h", FakeModel(ModelReply(tool_uses=[ToolUse(id="tc-h", name="list_files", input={})])),
                            turn_slots=slots)
        part.deliver(holder, create("h"))
        await run_until_idle(holder)
        for sid in ("q1", "q2", "q3"):
            actor = part.actor(sid, FakeModel(ModelReply(text="hi")), turn_slots=slots)
            part.deliver(actor, create(sid))
            await run_until_idle(actor)
        assert [fold(part.events(s)).status for s in ("q1", "q2", "q3")] == ["queued"] * 3
        other = part.actor("o", FakeModel(ModelReply(text="hi")), turn_slots=slots)
        other.tenant = "u"
        part.deliver(other, create("o").model_copy(update={"tenant": "u"}))
        await run_until_idle(other)
        assert fold(part.events("o")).status == "ended"  # its own tenant's slots: never queued
        assert list(slots.tenants["t"].queue) == ["q1", "q2", "q3"]
        assert await slots.release("t", "h") == ("q1",)  # the head, not whoever asks first
        assert (await slots.take("t", "q3")).granted is False
        assert (await slots.take("t", "q1")).granted is True
    finally:
        await part.writer.close()


async def test_cancelling_a_queued_session_leaves_the_queue():
    slots = MemoryTurnSlots(limits={"t": 1})
    part = Partition()
    await part.writer.start()
    try:
        holder = part.actor("h", FakeModel(ModelReply(tool_uses=[ToolUse(id="tc-h", name="list_files", input={})])),
                            turn_slots=slots)
        part.deliver(holder, create("h"))
        await run_until_idle(holder)
        waiting = part.actor("w", FakeModel(), turn_slots=slots)
        part.deliver(waiting, create("w"))
        await run_until_idle(waiting)
        assert "w" in slots.tenants["t"].queue
        part.deliver(waiting, c.CancelSession(command_id="cancel-w", session_id="w", tenant="t", actor="user:ann"))
        await run_until_idle(waiting)
    finally:
        await part.writer.close()
    assert fold(part.events("w")).status == "ended" and "w" not in slots.tenants["t"].queue


async def test_a_session_over_its_tenants_share_gives_its_slot_back_at_its_next_turn_and_waits_queued():
    """With the deployment's total shared (migration 0032), a session holding a slot is asked at
    its next turn (`keep`): its tenant holding more than its share, it gives the slot back there,
    records `turn_queued`, and starts again once granted; the turn under way is never cut."""
    slots = MemoryTurnSlots(default_limit=10, total=2)
    part = Partition()
    await part.writer.start()
    try:
        model = FakeModel(ModelReply(tool_uses=[ToolUse(id="tc-1", name="list_files", input={})]),
                          ModelReply(tool_uses=[ToolUse(id="tc-2", name="list_files", input={})]),
                          ModelReply(text="done"))
        first = part.actor("s1", model, turn_slots=slots)
        part.deliver(first, create("s1"))
        await run_until_idle(first)  # alone: granted, and at work on its first tool call
        assert (await slots.take("t", "s-elsewhere")).granted  # the tenant's other session, on another brain
        assert (await slots.take("u", "u1")).granted  # another tenant arrives: t's share is max(1, 2 - 1) = 1
        part.deliver(first, listed("tc-1"), TOOL_RESULTS)
        await run_until_idle(first)
        types = [e.type for e in part.events("s1")]
        assert types[-3:] == ["tool_result", "turn_ended", "turn_queued"], types  # its first turn ran to its end
        assert fold(part.events("s1")).status == "queued"
        assert "s1" in slots.tenants["t"].queue and "s1" not in slots.tenants["t"].slots
        await slots.release("u", "u1")  # alone again: t's next release grants what its quota allows
        assert await slots.release("t", "s-elsewhere") == ("s1",)
        part.deliver(first, wake("s1"))
        await run_until_idle(first)
        part.deliver(first, listed("tc-2"), TOOL_RESULTS)
        await run_until_idle(first)
        await eventually(lambda: fold(part.events("s1")).status == "ended")
    finally:
        await part.writer.close()
    events = part.events("s1")
    assert first_broken_seq(events) is None
    assert [e.type for e in events if e.type != "woke"].count("turn_queued") == 1
    assert first_divergence(events, tool_schemas()) is None  # the replay check takes the wait as recorded
    assert slots.tenants["t"].slots == {} and not slots.tenants["t"].queue


async def test_without_a_total_a_session_keeps_its_slot_from_turn_to_turn_whatever_its_tenant_holds():
    slots = MemoryTurnSlots(limits={"t": 1})
    part = Partition()
    await part.writer.start()
    try:
        model = FakeModel(ModelReply(tool_uses=[ToolUse(id="tc-1", name="list_files", input={})]),
                          ModelReply(text="done"))
        first = part.actor("s1", model, turn_slots=slots)
        part.deliver(first, create("s1"))
        await run_until_idle(first)
        slots.tenants["t"].slots["s-over"] = True  # over its quota (lowered meanwhile, say)
        part.deliver(first, listed("tc-1"), TOOL_RESULTS)
        await run_until_idle(first)
        await eventually(lambda: fold(part.events("s1")).status == "ended")
    finally:
        await part.writer.close()
    assert "turn_queued" not in [e.type for e in part.events("s1")]
