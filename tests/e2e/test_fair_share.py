"""Fair share through the four services as processes, on the real broker and database (issue
34). Over its running-sessions quota a tenant's new sessions are accepted, wait visibly
`queued`, and start in arrival order as its others finish; none is lost; another tenant's
sessions meanwhile never wait for them."""

from __future__ import annotations

import uuid

import httpx

from tests.e2e.sessions import wait_ended, wait_for
from tests.e2e.stored_log import assert_log_whole


def tenant_client(stack, tenant: str, principal: str, role: str = "user") -> httpx.Client:
    return httpx.Client(base_url=stack.url, timeout=30,
                        headers={"Authorization": f"Bearer {stack.api_key(principal, role, tenant)}"})


def test_over_its_running_quota_a_tenants_sessions_wait_queued_and_start_in_arrival_order(stack, client):
    tenant = f"fair-{uuid.uuid4().hex[:8]}"
    with tenant_client(stack, tenant, "fair-admin", "admin") as admin, tenant_client(stack, tenant, "fair") as user:
        assert admin.put("/v1/quotas", json={"running_sessions": 1}).status_code == 200
        ids = []
        for n in range(3):
            answer = user.post("/v1/sessions", json={"message": f"hold {n}", "wait": False,
                                                     "config": {"model": "scripted:hold2"}})
            assert answer.status_code == 202, answer.text
            ids.append(answer.json()["session_id"])
        seen_queued = set()

        def later_ones_queued():
            for sid in ids[1:]:
                if user.get(f"/v1/sessions/{sid}").json().get("status") == "queued":
                    seen_queued.add(sid)
            return seen_queued == set(ids[1:])
        wait_for(later_ones_queued, 30, "the second and third sessions to show queued", stack, every=0.1)
        listed = user.get("/v1/sessions", params={"status": "queued"}).json()
        assert {s["session_id"] for s in listed["data"]} <= set(ids) and listed["count"] >= 1, listed

        # Another tenant is not held behind them: its session runs while tenant's wait.
        other = client.post("/v1/sessions", json={"message": "go", "config": {"model": "scripted:tools3"}})
        assert other.status_code == 201, other.text
        other_id = other.json()["session_id"]
        wait_ended(client, stack, other_id, timeout=60)
        assert "turn_queued" not in [e.type for e in assert_log_whole(other_id)]
        assert user.get(f"/v1/sessions/{ids[2]}").json()["status"] == "queued"  # still waiting its turn

        ended = [wait_ended(user, stack, sid, timeout=90) for sid in ids]
        assert [s["ended_reason"] for s in ended] == ["completed"] * 3, ended
        logs = [assert_log_whole(sid, tenant) for sid in ids]
        for log in logs[1:]:
            assert [e.type for e in log].count("turn_queued") == 1, [e.type for e in log]
        # One running at a time, in arrival order: each starts only after the one before ended.
        starts = [next(e.ts for e in log if e.type == "turn_started") for log in logs]
        ends = [log[-1].ts for log in logs]
        assert starts[1] >= ends[0] and starts[2] >= ends[1], (starts, ends)
        for sid in ids:
            check = user.get(f"/v1/sessions/{sid}/replay", params={"check": "true"}).json()["check"]
            assert check["clean"], check


def test_the_queue_and_the_quota_survive_the_brain_and_the_gateway_killed_while_sessions_wait(stack, client):
    tenant = f"fair-{uuid.uuid4().hex[:8]}"
    with tenant_client(stack, tenant, "fair-admin", "admin") as admin:
        assert admin.put("/v1/quotas", json={"running_sessions": 1}).status_code == 200
    with tenant_client(stack, tenant, "fair") as user:
        ids = []
        for n in range(3):
            answer = user.post("/v1/sessions", json={"message": f"hold {n}", "wait": False,
                                                     "config": {"model": "scripted:hold2"}})
            assert answer.status_code == 202, answer.text
            ids.append(answer.json()["session_id"])
        wait_for(lambda: all(user.get(f"/v1/sessions/{sid}").json().get("status") == "queued" for sid in ids[1:]),
                 30, "the second and third sessions to show queued", stack, every=0.1)
    stack.services["brain"].kill9()
    stack.services["gateway"].kill9()
    stack.start("brain", "brain", WAKELINE_HOST="brain-2")
    stack.start("gateway", "gateway", WAKELINE_HOST="gateway-2")
    stack.wait_gateway()
    with tenant_client(stack, tenant, "fair-admin", "admin") as admin, tenant_client(stack, tenant, "fair") as user:
        quotas = admin.get("/v1/quotas").json()
        assert quotas["own"]["running_sessions"] == 1 and quotas["effective"]["running_sessions"] == 1, quotas
        ended = [wait_ended(user, stack, sid, timeout=120) for sid in ids]
        assert [s["ended_reason"] for s in ended] == ["completed"] * 3, ended
    logs = [assert_log_whole(sid, tenant) for sid in ids]
    starts = [next(e.ts for e in log if e.type == "turn_started") for log in logs]
    ends = [log[-1].ts for log in logs]
    assert starts[1] >= ends[0] and starts[2] >= ends[1], (starts, ends)  # still one at a time, in order
    for log in logs:  # every tool ran once, none lost to the crash
        assert [e.type for e in log].count("tool_result") == 1, [e.type for e in log]
