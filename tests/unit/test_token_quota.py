"""A tenant's daily token quota: which tokens count and the end it records (`agent.quota`,
pure), the brain's count with its cache (`TenantQuotas` over a `FakeCounter`), and a session
actor that ends `quota` instead of calling the model, then continues once the quota is raised.
The count in Postgres, every brain's, is tests/integration/test_postgres_token_days.py; the
services as processes, tests/e2e/test_tenant_quotas.py."""

from __future__ import annotations

import uuid
from datetime import date

import pytest

from tests.unit.actor_partition import FakeModel, Partition, create, run_until_idle, run_until_idle_with
from wakeline.agent.model import ModelReply, ToolUse
from wakeline.agent.quota import TokenDay, quota_end, tokens_counted
from wakeline.agent.replay_check import first_divergence
from wakeline.contract import commands as c
from wakeline.contract.codec import decode
from wakeline.contract.events import SessionEnded, SessionEndedPayload, Usage
from wakeline.contract.tools import tool_schemas
from wakeline.contract.topics import TOOL_CALLS
from wakeline_brain.tenant_quotas import Counted, TenantQuotas

DAY = date(2026, 12, 5)


class FakeCounter:
    """`count_tenant_tokens` in memory: a total per tenant and day, the tenants' own quotas,
    and every call made (tenant, tokens)."""

    def __init__(self) -> None:
        self.day = DAY
        self.used: dict[tuple[str, date], int] = {}
        self.own: dict[str, tuple[int | None, int | None]] = {}
        self.calls: list[tuple[str, int]] = []
        self.failing = False

    async def __call__(self, tenant: str, tokens: int) -> Counted:
        self.calls.append((tenant, tokens))
        if self.failing:
            raise OSError("database restarting")
        key = (tenant, self.day)
        self.used[key] = self.used.get(key, 0) + tokens
        own = self.own.get(tenant, (None, None))
        return Counted(self.day, self.used[key], *own)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def quotas_over(counter: FakeCounter, tokens_per_day: int | None = None, fresh_s: float = 2.0,
                clock: Clock | None = None) -> TenantQuotas:
    return TenantQuotas(counter, tokens_per_day, 200, fresh_s=fresh_s, clock=clock or Clock(),
                        today=lambda: counter.day)


def test_every_token_read_or_written_counts_cached_or_not() -> None:
    usage = Usage(input_tokens=10, output_tokens=5, cache_creation_input_tokens=100, cache_read_input_tokens=1000)
    assert tokens_counted(usage) == 1115


def test_a_day_is_spent_once_its_quota_is_reached_and_never_without_one() -> None:
    assert TokenDay("t", DAY, 100, 100).spent and TokenDay("t", DAY, 101, 100).spent
    assert not TokenDay("t", DAY, 99, 100).spent and not TokenDay("t", DAY, 10**12, None).spent


def test_the_end_names_the_quota_the_figures_and_how_to_go_on() -> None:
    end = quota_end(TokenDay("acme", DAY, 1234, 1000))
    assert isinstance(end.payload, SessionEndedPayload)
    assert end.payload.reason == "quota" and end.actor == "system:brain" and end.trust == "instruction"
    detail = end.payload.detail or ""
    assert "tokens_per_day" in detail and "1234 of 1000" in detail and "2026-12-05" in detail
    assert "rolls over" in detail and "raised" in detail


async def test_a_check_under_the_quota_reuses_the_last_count_until_it_is_stale() -> None:
    counter, clock = FakeCounter(), Clock()
    quotas = quotas_over(counter, tokens_per_day=1000, clock=clock)
    assert await quotas.spent("t") is None
    await quotas.count("t", Usage(input_tokens=100, output_tokens=10))
    clock.now = 1.0
    assert await quotas.spent("t") is None
    assert counter.calls == [("t", 0), ("t", 110)]  # the check after the add read nothing
    clock.now = 3.5
    assert await quotas.spent("t") is None
    assert counter.calls[-1] == ("t", 0)  # stale: read again


async def test_a_refusal_is_always_decided_on_a_fresh_read_so_a_raise_is_seen_at_once() -> None:
    counter = FakeCounter()
    quotas = quotas_over(counter, tokens_per_day=100)
    await quotas.count("t", Usage(input_tokens=150))
    spent = await quotas.spent("t")
    assert spent == TokenDay("t", DAY, 150, 100)
    assert counter.calls[-1] == ("t", 0)  # read again before refusing
    counter.own["t"] = (10_000, None)  # an admin raised it
    assert await quotas.spent("t") is None


async def test_the_day_rolling_over_starts_a_new_count() -> None:
    counter = FakeCounter()
    quotas = quotas_over(counter, tokens_per_day=100)
    await quotas.count("t", Usage(output_tokens=100))
    assert await quotas.spent("t") is not None
    counter.day = date(2026, 12, 6)
    assert await quotas.spent("t") is None


async def test_tenants_are_counted_apart_and_a_tenants_own_quota_beats_the_default() -> None:
    counter = FakeCounter()
    counter.own["big"] = (10**9, 3)
    quotas = quotas_over(counter, tokens_per_day=100)
    await quotas.count("small", Usage(input_tokens=100))
    await quotas.count("big", Usage(input_tokens=100))
    assert await quotas.spent("small") is not None and await quotas.spent("big") is None
    assert quotas.calls_in_flight("big") == 3 and quotas.calls_in_flight("small") == 200
    assert quotas.calls_in_flight("unseen") == 200  # the default until a count says otherwise


async def test_a_failed_add_is_kept_and_sent_with_the_next_and_a_failed_read_raises() -> None:
    counter = FakeCounter()
    quotas = quotas_over(counter, tokens_per_day=1000)
    counter.failing = True
    await quotas.count("t", Usage(input_tokens=40))  # no raise: the reply it counts is good
    with pytest.raises(OSError):
        await quotas.spent("t")
    counter.failing = False
    await quotas.count("t", Usage(input_tokens=2))
    assert counter.used[("t", DAY)] == 42


def message(sid: str, text: str = "go on") -> c.PostMessage:
    return c.PostMessage(command_id=f"msg-{uuid.uuid4()}", session_id=sid, tenant="t", actor="user:ann", text=text)


async def test_a_session_whose_tenant_used_its_day_ends_quota_without_a_call_and_a_raise_continues_it() -> None:
    part, counter = Partition(), FakeCounter()
    quotas = quotas_over(counter, tokens_per_day=100)
    await part.writer.start()
    try:
        first = FakeModel(ModelReply(text="done", usage=Usage(input_tokens=90, output_tokens=20)))
        actor = part.actor("s1", first)
        actor.deps.tenant_quotas = quotas
        await run_until_idle_with(part, actor, create("s1"))
        second = FakeModel(ModelReply(text="finally", usage=Usage(input_tokens=5, output_tokens=5)))
        actor = part.actor("s2", second)
        actor.deps.tenant_quotas = quotas
        await run_until_idle_with(part, actor, create("s2"))
        assert second.requests == []  # never called
        stopped = part.events("s2")
        assert [e.type for e in stopped][-2:] == ["turn_started", "session_ended"]
        end = stopped[-1]
        assert isinstance(end, SessionEnded) and end.payload.reason == "quota"
        assert "110 of 100" in (end.payload.detail or "")

        part.deliver(actor, message("s2"))
        await run_until_idle(actor)  # still used up: it ends `quota` again, nothing called
        assert second.requests == [] and part.events("s2")[-1].payload.reason == "quota"  # type: ignore[union-attr]
        counter.own["t"] = (1_000, None)
        part.deliver(actor, message("s2", "now"))
        await run_until_idle(actor)
    finally:
        await part.writer.close()
    assert len(second.requests) == 1
    events = part.events("s2")
    assert events[-1].payload.reason == "completed"  # type: ignore[union-attr]
    assert counter.used[("t", DAY)] == 120
    assert first_divergence(events, tool_schemas()) is None  # the ends are taken as recorded


async def test_tool_calls_carry_the_tenants_calls_in_flight_quota_to_the_runners() -> None:
    part, counter = Partition(), FakeCounter()
    counter.own["t"] = (None, 2)
    await part.writer.start()
    try:
        model = FakeModel(ModelReply(tool_uses=[ToolUse(id="tc-1", name="list_files", input={})]))
        actor = part.actor("s1", model)
        actor.deps.tenant_quotas = quotas_over(counter)
        await run_until_idle_with(part, actor, create("s1"))
    finally:
        await part.writer.close()
    [call] = [decode(s.value, c.ToolCallRequest.model_validate_json) for t in part.producer.committed
              for s in t.sent if s.topic == TOOL_CALLS]
    assert call.tenant_calls_in_flight == 2


async def test_a_tenant_with_no_quota_costs_no_round_trip_per_call_and_a_new_quota_is_learnt() -> None:
    counter, clock = FakeCounter(), Clock()
    quotas = quotas_over(counter, tokens_per_day=None, clock=clock)
    assert await quotas.spent("t") is None
    for _ in range(5):
        await quotas.count("t", Usage(input_tokens=100))
    assert counter.calls == [("t", 0)]  # the one read: unlimited, so nothing is added
    counter.own["t"] = (150, None)  # set during the day: counted from when the brain learns it
    clock.now = 3.0
    assert await quotas.spent("t") is None
    await quotas.count("t", Usage(input_tokens=100))
    await quotas.count("t", Usage(input_tokens=100))
    assert await quotas.spent("t") == TokenDay("t", DAY, 200, 150)
