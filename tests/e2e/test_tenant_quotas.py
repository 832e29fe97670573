"""A tenant's quotas that bind inside the runtime, through the four services as processes on
the real broker and database: tokens per day stop the tenant's sessions before their next
model call (`session_ended`, reason `quota`) while another tenant runs on, and a raised quota
continues them; tool calls in flight hold a tenant's calls apart while another tenant's run
beside them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from tests.e2e.sessions import create_session, wait_ended, wait_for
from tests.e2e.stored_log import assert_log_whole
from wakeline.contract.events import SessionEnded, ToolResultReceived


def fresh_tenant() -> str:
    return f"tq{uuid.uuid4().hex[:10]}"


@contextmanager
def tenant_client(stack, tenant: str, role: str = "user") -> Iterator[httpx.Client]:
    key = stack.api_key(f"{role}-{uuid.uuid4().hex[:6]}", role, tenant)
    with httpx.Client(base_url=stack.url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as client:
        yield client


def set_quotas(stack, tenant: str, **quotas: int) -> dict:
    with tenant_client(stack, tenant, "admin") as admin:
        answer = admin.put("/v1/quotas", json=quotas)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_tenants_used_tokens_stop_its_sessions_before_the_model_and_a_raised_quota_continues_them(stack):
    tenant, other = fresh_tenant(), fresh_tenant()
    answer = set_quotas(stack, tenant, tokens_per_day=1)
    assert {"tokens_per_day", "tool_calls_in_flight"} <= set(answer["enforced"])
    with tenant_client(stack, tenant) as client, tenant_client(stack, other) as others:
        first = create_session(client, "tools3")
        assert wait_ended(client, stack, first)["ended_reason"] == "quota"
        # its first call used the day's one token: the second is not made
        assert [e.type for e in assert_log_whole(first, tenant)].count("model_turn") == 1

        second = create_session(client, "tools3")
        unaffected = create_session(others, "tools3")
        stopped = wait_ended(client, stack, second)
        assert stopped["ended_reason"] == "quota", stopped
        events = assert_log_whole(second, tenant)
        assert [e.type for e in events][-2:] == ["turn_started", "session_ended"]  # before its model call
        assert "model_turn" not in [e.type for e in events]
        end = events[-1]
        assert isinstance(end, SessionEnded) and end.actor == "system:brain"
        assert "tokens_per_day" in (end.payload.detail or "") and " of 1 tokens" in (end.payload.detail or "")
        assert wait_ended(others, stack, unaffected)["ended_reason"] == "completed"

        set_quotas(stack, tenant, tokens_per_day=10_000_000)
        posted = client.post(f"/v1/sessions/{second}/messages", json={"text": "go on"})
        assert posted.status_code in (200, 202), posted.text
        done = wait_for(lambda: (s := client.get(f"/v1/sessions/{second}").json())["ended_reason"] == "completed"
                        and s, 90, "the continued session to complete", stack)
        events = assert_log_whole(second, tenant)
        assert done["last_seq"] == events[-1].seq
        assert [e for e in events if e.type == "model_turn"][-1].payload.text.startswith("Done:")
        check = client.get(f"/v1/sessions/{second}/replay", params={"check": "true"}).json()["check"]
        assert check["clean"], check  # the end is the count's answer, taken as recorded


def run_times(events) -> list[tuple[float, float]]:
    """Each tool call's run in the runner, (start, end) in epoch seconds: its result's time less
    the run's duration (both ends are late by the same hop to the brain)."""
    return [(e.ts.timestamp() - e.payload.duration_ms / 1000, e.ts.timestamp())
            for e in events if isinstance(e, ToolResultReceived)]


def overlapping(runs: list[tuple[float, float]], slack_s: float = 0.5) -> int:
    """The most runs under way at one moment, each cut short by `slack_s` at both ends."""
    edges = sorted([(start + slack_s, 1) for start, end in runs] + [(end - slack_s, -1) for start, end in runs])
    most = running = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def test_a_tenants_tool_calls_in_flight_hold_its_calls_apart_while_another_tenants_run_beside(stack):
    held, free = fresh_tenant(), fresh_tenant()
    set_quotas(stack, held, tool_calls_in_flight=1)
    with tenant_client(stack, held) as holding, tenant_client(stack, free) as freely:
        # the held tenant first: a quota that made the others wait behind it would show
        held_ids = [create_session(holding, "sleep3") for _ in range(3)]
        free_ids = [create_session(freely, "sleep3") for _ in range(3)]
        for client, ids in ((holding, held_ids), (freely, free_ids)):
            for sid in ids:
                ended = wait_ended(client, stack, sid, timeout=120)
                assert ended["ended_reason"] == "completed", ended  # nothing failed: they waited
    held_runs = [run for sid in held_ids for run in run_times(assert_log_whole(sid, held))]
    free_runs = [run for sid in free_ids for run in run_times(assert_log_whole(sid, free))]
    assert len(held_runs) == len(free_runs) == 3
    assert all(end - start >= 2.9 for start, end in held_runs + free_runs)
    assert overlapping(held_runs) == 1, sorted(held_runs)  # one after another
    assert overlapping(free_runs) >= 2, sorted(free_runs)  # not held by the other tenant's quota
    # ran while the held tenant's first call ran and its others waited, not behind them
    assert min(start for start, _ in free_runs) < min(end for _, end in held_runs), (held_runs, free_runs)
    assert max(start for start, _ in free_runs) < max(start for start, _ in held_runs), (held_runs, free_runs)
