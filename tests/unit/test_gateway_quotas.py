"""The quotas' pure parts: which quotas a command counts against, what applies to a tenant, the
Retry-After of a refusal (the same sliding estimate `admit_quotas` counts with), the 429 it
becomes, the metric that counts it, and that a refused command is never sent. The count
itself is Postgres's: tests/integration/test_gateway_quotas.py."""

from __future__ import annotations


import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from wakeline.contract.commands import CommandBase, CreateSession, ForkOrigin, PostMessage, SubmitToolResult
from wakeline_gateway.dispatch import CommandDispatcher, Waits
from wakeline_gateway.metrics import CountedRefusals
from wakeline_gateway.quotas.gate import QuotaExceeded, QuotaGate
from wakeline.contract.quotas import (
    QUOTA_NAMES, Refusal, above_ceiling, counted_against, effective, retry_after_s,
)
from wakeline.storage.quota_counts import QuotaCounts
from wakeline_gateway.settings import GatewaySettings

IDS = {"command_id": "c", "session_id": "s", "tenant": "acme", "actor": "user:a"}


def test_every_command_counts_per_second_and_a_new_session_or_fork_per_minute_first() -> None:
    fork = CreateSession(**IDS, fork_of=ForkOrigin(session_id="p", seq=3, hash="0" * 64))
    assert counted_against(CreateSession(**IDS)) == counted_against(fork) == (
        "sessions_per_minute", "commands_per_second")
    assert counted_against(PostMessage(**IDS, text="hi")) == ("commands_per_second",)
    assert counted_against(SubmitToolResult(**IDS, tool_call_id="t", output="o")) == ()  # the session's own pace


def test_the_tenants_own_value_wins_and_an_unset_one_falls_back_to_the_default() -> None:
    defaults = GatewaySettings().quota_defaults()
    applied = effective({"commands_per_second": 5, "sessions_per_minute": None}, defaults)
    assert set(applied) == set(QUOTA_NAMES)
    assert (applied["commands_per_second"], applied["sessions_per_minute"], applied["tokens_per_day"]) == (
        5, defaults["sessions_per_minute"], None)


def test_the_defaults_leave_a_laptop_alone_and_tokens_unlimited() -> None:
    assert GatewaySettings().quota_defaults() == {"running_sessions": 100, "sessions_per_minute": 600,
                                                  "commands_per_second": 200, "tool_calls_in_flight": 200,
                                                  "tokens_per_day": None}


def test_the_defaults_come_from_the_environment_and_none_is_unlimited(monkeypatch) -> None:
    monkeypatch.setenv("WAKELINE_QUOTA_COMMANDS_PER_SECOND", "7")
    monkeypatch.setenv("WAKELINE_QUOTA_SESSIONS_PER_MINUTE", "unlimited")
    defaults = GatewaySettings().quota_defaults()
    assert (defaults["commands_per_second"], defaults["sessions_per_minute"]) == (7, None)


@pytest.mark.parametrize("refusal, seconds", [
    # This window alone is full: wait for the next, where its count weighs (1 - elapsed).
    (Refusal("sessions_per_minute", 2, 0, 2, 60, 0.25), 45 + 30),   # 2 × (1 - e) + 1 <= 2 from e = 1/2
    (Refusal("commands_per_second", 1, 0, 1, 1, 0.5), 2),           # its one slides out over the next: 1.5 s
    # The previous window's weight is what fills it: wait until enough of it has slid out.
    (Refusal("sessions_per_minute", 10, 10, 4, 60, 0.1), 24),       # 10 × (1 - e) <= 5 from e = 1/2
    (Refusal("commands_per_second", 50, 100, 0, 1, 0.0), 1),       # a fraction of a second is still 1
])
def test_retry_after_is_when_the_estimate_first_leaves_room_for_one(refusal, seconds) -> None:
    assert retry_after_s(refusal) == seconds


def estimate(previous: int, current: int, elapsed: float) -> float:
    """`admit_quotas`' estimate, with one more counted."""
    return previous * (1 - elapsed) + current + 1


@given(limit=st.integers(1, 500), previous=st.integers(0, 1000), current=st.integers(0, 1000),
       elapsed=st.floats(0, 0.999), window=st.sampled_from([1, 60]))
def test_retry_after_is_never_early_and_at_most_a_second_late(limit, previous, current, elapsed, window) -> None:
    if estimate(previous, current, elapsed) <= limit:
        return  # admitted, not a refusal
    wait = retry_after_s(Refusal("q", limit, previous, current, window, elapsed))
    assert wait >= 1

    def fits(seconds: float) -> bool:  # one more at now + seconds, nobody else admitted meanwhile
        at = elapsed + seconds / window
        if at < 1:
            return estimate(previous, current, at) <= limit + 1e-9
        return estimate(current, 0, at - 1) <= limit + 1e-9 if at < 2 else True

    assert fits(wait)
    assert wait == 1 or not fits(wait - 1 - 1e-6)


class FakePool:
    """`TenantPool.system_statement` answering `admit_quotas` with one row (a refusal) or none."""

    def __init__(self, refusal: Refusal | None):
        self.refusal, self.asked = refusal, []

    async def system_statement(self, run, tenant, quotas, windows_s, defaults):
        self.asked.append((tenant, tuple(quotas), tuple(windows_s), tuple(defaults)))
        r = self.refusal
        return None if r is None else {"refused": r.quota, "refused_limit": r.limit, "previous_n": r.previous,
                                       "current_n": r.current, "window_seconds": r.window_s,
                                       "window_elapsed": r.elapsed}


class Inbox:
    def __init__(self) -> None:
        self.sent: list[CommandBase] = []

    async def submit(self, command: CommandBase) -> None:
        self.sent.append(command)


async def test_a_refused_command_is_a_429_naming_the_quota_is_counted_and_is_never_sent() -> None:
    pool = FakePool(Refusal("commands_per_second", 3, 0, 3, 1, 0.4))
    defaults = {"sessions_per_minute": 600, "commands_per_second": None}
    inbox = Inbox()
    dispatcher = CommandDispatcher(inbox, None, Waits(1, 1), 1_000_000,  # type: ignore[arg-type]
                                   quotas=CountedRefusals(QuotaGate(QuotaCounts(pool, defaults))))  # type: ignore[arg-type]
    labels = {"tenant": "acme", "quota": "commands_per_second"}
    before = REGISTRY.get_sample_value("wakeline_gateway_quota_rejections_total", labels) or 0.0
    with pytest.raises(QuotaExceeded) as refused:
        await dispatcher.dispatch(CreateSession(**IDS), wait=False)
    assert inbox.sent == []
    assert pool.asked == [("acme", ("sessions_per_minute", "commands_per_second"), (60, 1), (600, None))]
    error = refused.value
    assert (error.status, error.code, error.extra, error.headers) == (
        429, "quota_exceeded", {"quota": "commands_per_second", "limit": 3}, {"Retry-After": "1"})
    assert "3 commands per second" in error.detail
    assert REGISTRY.get_sample_value("wakeline_gateway_quota_rejections_total", labels) == before + 1


async def test_an_admitted_command_is_sent() -> None:
    inbox = Inbox()
    dispatcher = CommandDispatcher(inbox, None, Waits(1, 1), 1_000_000,  # type: ignore[arg-type]
                                   quotas=QuotaGate(QuotaCounts(FakePool(None), {})))  # type: ignore[arg-type]
    answer = await dispatcher.dispatch(PostMessage(**IDS, text="hi"), wait=False)
    assert answer.status == "pending" and [c.command_id for c in inbox.sent] == ["c"]


DEFAULTS = {"running_sessions": 100, "sessions_per_minute": 600, "commands_per_second": 200,
            "tool_calls_in_flight": 200, "tokens_per_day": None}


def test_what_applies_is_the_lower_of_the_tenants_own_value_and_its_ceiling() -> None:
    own = {"running_sessions": 500, "sessions_per_minute": 10, "commands_per_second": 500, "tokens_per_day": 9}
    ceilings = {"running_sessions": 50, "commands_per_second": None, "tool_calls_in_flight": 300}
    assert effective(own, DEFAULTS, ceilings) == {
        "running_sessions": 50,  # own above the operator's ceiling: the ceiling
        "sessions_per_minute": 10,  # own below the default: own
        "commands_per_second": 200,  # no ceiling set: the default is the ceiling
        "tool_calls_in_flight": 300,  # no own value: the operator's ceiling, above the default
        "tokens_per_day": 9}  # no default, no ceiling: own
    assert effective({}, DEFAULTS, {})["tokens_per_day"] is None  # unlimited only when all three are


@given(own=st.none() | st.integers(1, 10**6), cap=st.none() | st.integers(1, 10**6),
       default=st.none() | st.integers(1, 10**6))
def test_a_tenant_can_lower_its_quota_never_raise_it_above_the_ceiling(own, cap, default) -> None:
    applied = effective({"running_sessions": own}, {"running_sessions": default},
                        {"running_sessions": cap})["running_sessions"]
    ceiling = cap if cap is not None else default
    if ceiling is not None:
        assert applied is not None and applied <= ceiling
    if own is not None:
        assert applied is not None and applied <= own
    assert applied in (own, ceiling)


def test_only_a_new_value_above_its_ceiling_is_refused() -> None:
    asked = {"running_sessions": 60, "commands_per_second": 300, "sessions_per_minute": 600, "tokens_per_day": 5}
    assert above_ceiling(asked, {}, DEFAULTS, {"running_sessions": 50}) == [
        ("running_sessions", 60, 50), ("commands_per_second", 300, 200)]
    # a value the tenant had before the ceiling came down is kept (the ceiling caps it anyway)
    assert above_ceiling(asked, {"running_sessions": 60, "commands_per_second": 300}, DEFAULTS,
                         {"running_sessions": 50}) == []
    assert above_ceiling({"tokens_per_day": 10**12}, {}, DEFAULTS, {}) == []  # no default, no ceiling
