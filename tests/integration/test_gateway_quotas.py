"""Quotas through the gateway on the real stack: an admin sets them and every key of the tenant
reads them; over a rate quota a command is 429 with Retry-After and `quota_exceeded`, and nothing
reaches Kafka; the count lives in Postgres, so two gateways share it and a restart keeps it.

No brain runs: commands are sent with `wait=false` (202) and checked on the real inbox. Each test
uses a tenant of its own (gateway_settings), so its counts start at zero.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from contextlib import AsyncExitStack

import httpx
import pytest
from prometheus_client import REGISTRY

from conftest_pg import owner_connection, set_tenant
from wakeline.ops.quota_ceilings import set_ceilings
from gateway_harness import InboxWatcher, Seeder, api_key, bearer, created, gateway_settings, running_gateway
from wakeline.contract.commands import parse_command
from wakeline.storage.pg import TenantPool

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]
PROBLEM = "application/problem+json"


async def seeded_session(settings) -> str:
    """A session of `user:local` (the harness's default key owner) in the settings' tenant."""
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=1) as pool:
        return (await Seeder(pool, settings.tenant).session([created()]))[0].session_id


def message(client: httpx.AsyncClient, session_id: str, text: str = "hi", **headers: str):
    return client.post(f"/v1/sessions/{session_id}/messages", params={"wait": "false"}, json={"text": text},
                       headers=headers)


def create(client: httpx.AsyncClient, **headers: str):
    return client.post("/v1/sessions", json={"message": "go", "wait": False}, headers=headers)


def refused_by(answer: httpx.Response, quota: str, limit: int) -> None:
    body = answer.json()
    assert answer.status_code == 429, answer.text
    assert answer.headers["content-type"].startswith(PROBLEM)
    assert re.fullmatch(r"[1-9][0-9]*", answer.headers["retry-after"]), answer.headers
    assert (body["code"], body["quota"], body["limit"], body["status"]) == ("quota_exceeded", quota, limit, 429)


def command_id(value: bytes) -> str:
    return parse_command(value).command_id


async def put_quotas(settings, **quotas: int | None) -> httpx.Response:
    """PUT /v1/quotas with a fresh admin key of the settings' tenant."""
    async with running_gateway(settings, principal="adam", role="admin") as (_, admin):
        return await admin.put("/v1/quotas", json=quotas)


async def test_an_admin_sets_the_quotas_every_key_reads_them_and_each_change_is_kept() -> None:
    settings = gateway_settings()
    async with running_gateway(settings, principal="adam", role="admin") as (_, admin):
        first = await admin.put("/v1/quotas", json={"commands_per_second": 40, "tokens_per_day": 5_000_000})
        second = await admin.put("/v1/quotas", json={"commands_per_second": 30, "sessions_per_minute": 9})
        assert first.status_code == second.status_code == 200, second.text
        reads = {}
        for role in ("user", "auditor", "service"):
            key = bearer(await api_key(settings.tenant, f"{role}-1", role))
            reads[role] = (await admin.get("/v1/quotas", headers=key)).json()
    answer = second.json()
    assert reads == {role: answer for role in reads}
    assert answer["tenant"] == settings.tenant and answer["set_by"] == "user:adam"
    assert answer["own"] == {"running_sessions": None, "sessions_per_minute": 9, "commands_per_second": 30,
                             "tool_calls_in_flight": None, "tokens_per_day": None}  # a PUT replaces them all
    assert answer["effective"] == {**settings.quota_defaults(), "sessions_per_minute": 9, "commands_per_second": 30}
    assert answer["defaults"] == settings.quota_defaults()
    assert answer["enforced"] == ["sessions_per_minute", "commands_per_second", "running_sessions",
                                  "tool_calls_in_flight", "tokens_per_day"]
    changes = [(c["old"] and c["old"]["commands_per_second"], c["new"]["commands_per_second"],
                c["new"]["tokens_per_day"], c["set_by"]) for c in answer["history"]]
    assert changes == [(None, 40, 5_000_000, "user:adam"), (40, 30, None, "user:adam")]


async def test_only_an_admin_may_set_them_and_a_refusal_is_a_403_problem() -> None:
    settings = gateway_settings()
    async with running_gateway(settings, principal="local", role="user") as (_, client):
        for role in ("user", "auditor", "service"):
            key = bearer(await api_key(settings.tenant, f"{role}-2", role))
            refused = await client.put("/v1/quotas", json={"commands_per_second": 10_000}, headers=key)
            assert refused.status_code == 403 and refused.headers["content-type"].startswith(PROBLEM), role
            assert refused.json()["code"] == "forbidden" and "set the tenant's quotas" in refused.json()["detail"]
        after = (await client.get("/v1/quotas")).json()
    assert after["history"] == [] and after["own"]["commands_per_second"] is None


@pytest.mark.parametrize("body, where", [
    ({"commands_per_second": 0}, "commands_per_second"), ({"sessions_per_minute": -1}, "sessions_per_minute"),
    ({"commands_per_second": "5"}, "commands_per_second"), ({"commands_per_second": 2.5}, "commands_per_second"),
    ({"running_sessions": True}, "running_sessions"), ({"tokens_per_day": 10**16}, "tokens_per_day"),
    ({"commands_per_second": 2**31}, "commands_per_second"), ({"tenant": "another"}, "tenant"),
    ([{"commands_per_second": 5}], "body"),
])
async def test_a_bad_body_is_a_422_problem_naming_the_field_and_changes_nothing(body, where) -> None:
    settings = gateway_settings()
    async with running_gateway(settings, principal="adam", role="admin") as (_, admin):
        answer = await admin.put("/v1/quotas", json=body)
        unchanged = (await admin.get("/v1/quotas")).json()
    assert answer.status_code == 422 and answer.headers["content-type"].startswith(PROBLEM), answer.text
    assert answer.json()["code"] == "invalid_request" and where in answer.json()["errors"][0]["where"]
    assert unchanged["history"] == []


async def test_a_body_that_is_not_json_is_a_422_problem() -> None:
    settings = gateway_settings()
    async with running_gateway(settings, principal="adam", role="admin") as (_, admin):
        answer = await admin.put("/v1/quotas", content=b"{commands_per_second: 5",
                                 headers={"content-type": "application/json"})
    assert answer.status_code == 422 and answer.headers["content-type"].startswith(PROBLEM), answer.text


async def test_over_commands_per_second_is_429_with_retry_after_and_nothing_reaches_kafka() -> None:
    settings = gateway_settings()
    assert (await put_quotas(settings, commands_per_second=2)).status_code == 200
    sid = await seeded_session(settings)
    labels = {"tenant": settings.tenant, "quota": "commands_per_second"}
    async with running_gateway(settings) as (_, client), InboxWatcher(settings) as watcher:
        answers = [await message(client, sid, f"m{n}") for n in range(3)]
        on_kafka = await watcher.up_to_now(sid)
    assert [a.status_code for a in answers[:2]] == [202, 202]
    refused_by(answers[2], "commands_per_second", 2)
    assert "nothing was sent" in answers[2].json()["detail"]
    assert [r.value for r in on_kafka] and len(on_kafka) == 2
    assert {a.json()["command_id"] for a in answers[:2]} == {command_id(r.value) for r in on_kafka}
    assert REGISTRY.get_sample_value("wakeline_gateway_quota_rejections_total", labels) == 1.0


async def test_a_refused_command_retried_with_its_key_after_retry_after_is_sent_once() -> None:
    settings = gateway_settings()
    assert (await put_quotas(settings, commands_per_second=1)).status_code == 200
    sid = await seeded_session(settings)
    async with running_gateway(settings) as (_, client), InboxWatcher(settings) as watcher:
        assert (await message(client, sid, "first")).status_code == 202
        refused = await message(client, sid, "second", **{"Idempotency-Key": "k-2"})
        refused_by(refused, "commands_per_second", 1)
        await asyncio.sleep(int(refused.headers["retry-after"]))
        retried = await message(client, sid, "second", **{"Idempotency-Key": "k-2"})
        on_kafka = await watcher.up_to_now(sid)
    assert retried.status_code == 202, retried.text
    assert [command_id(r.value) for r in on_kafka][-1] == retried.json()["command_id"] and len(on_kafka) == 2


async def test_another_tenant_is_not_held_back_by_one_over_its_quota() -> None:
    settings = gateway_settings()
    neighbour = gateway_settings()  # a tenant of its own
    assert (await put_quotas(settings, commands_per_second=1)).status_code == 200
    mine, theirs = await seeded_session(settings), await seeded_session(neighbour)
    async with running_gateway(settings) as (_, client):
        other = bearer(await api_key(neighbour.tenant, "local", "user"))
        assert (await message(client, mine)).status_code == 202
        refused_by(await message(client, mine), "commands_per_second", 1)
        # The same moment, the same gateway: the neighbour's commands go through on its defaults.
        neighbours = [await client.post(f"/v1/sessions/{theirs}/messages", params={"wait": "false"},
                                        json={"text": "hi"}, headers=other) for _ in range(5)]
        refused_by(await message(client, mine), "commands_per_second", 1)
    assert [a.status_code for a in neighbours] == [202] * 5


async def test_two_gateways_count_one_tenants_sessions_together() -> None:
    settings = gateway_settings()
    assert (await put_quotas(settings, sessions_per_minute=3)).status_code == 200
    async with AsyncExitStack() as stack:
        gateways = [(await stack.enter_async_context(running_gateway(settings)))[1] for _ in range(2)]
        answers = [await create(gateways[n % 2]) for n in range(5)]
    assert [a.status_code for a in answers[:3]] == [202] * 3
    for answer in answers[3:]:
        refused_by(answer, "sessions_per_minute", 3)
        assert int(answer.headers["retry-after"]) > 1  # a minute's window, not a second's
    # The refused creates took nothing from commands per second either.
    async with owner_connection() as conn, conn.transaction():
        await set_tenant(conn, settings.tenant)
        counted = await conn.fetchval("SELECT sum(n) FROM quota_counters WHERE quota = 'commands_per_second'")
    assert counted == 3


async def test_the_quotas_and_the_count_outlive_a_gateway_restart() -> None:
    settings = gateway_settings()
    assert (await put_quotas(settings, sessions_per_minute=1)).status_code == 200
    async with running_gateway(settings) as (_, client):
        assert (await create(client)).status_code == 202
    async with running_gateway(settings) as (_, client):  # a new app: new pool, nothing in memory
        read = (await client.get("/v1/quotas")).json()
        refused_by(await create(client, **{"Idempotency-Key": str(uuid.uuid4())}), "sessions_per_minute", 1)
    assert read["own"]["sessions_per_minute"] == read["effective"]["sessions_per_minute"] == 1


async def test_an_admin_cannot_set_a_quota_above_its_ceiling_and_nothing_changes() -> None:
    settings = gateway_settings()
    async with owner_connection() as conn:
        await set_ceilings(conn, settings.tenant, {"running_sessions": 5}, "operator:ops")
    async with running_gateway(settings, principal="adam", role="admin") as (_, admin):
        over_own = await admin.put("/v1/quotas", json={"running_sessions": 6, "sessions_per_minute": 9})
        over_default = await admin.put("/v1/quotas", json={"commands_per_second": settings.quota_commands_per_second
                                                           + 1})
        unchanged = (await admin.get("/v1/quotas")).json()
        lowered = await admin.put("/v1/quotas", json={"running_sessions": 3})
    assert over_own.status_code == over_default.status_code == 422, over_own.text
    assert over_own.headers["content-type"].startswith(PROBLEM)
    body = over_own.json()
    assert (body["code"], body["quota"], body["asked"], body["ceiling"]) == ("above_ceiling", "running_sessions", 6, 5)
    assert "ceiling of 5" in body["detail"]
    assert (over_default.json()["quota"], over_default.json()["ceiling"]) == (
        "commands_per_second", settings.quota_commands_per_second)
    assert unchanged["history"] == [] and unchanged["own"]["sessions_per_minute"] is None
    assert lowered.status_code == 200 and lowered.json()["effective"]["running_sessions"] == 3


async def test_every_key_reads_the_ceilings_and_what_applies_is_the_lower() -> None:
    settings = gateway_settings()
    async with owner_connection() as conn:
        await set_ceilings(conn, settings.tenant, {"running_sessions": 500, "tokens_per_day": 1000}, "operator:ops")
    async with running_gateway(settings, principal="adam", role="admin") as (_, admin):
        answer = (await admin.put("/v1/quotas", json={"tokens_per_day": 900})).json()
        async with owner_connection() as conn:  # the operator lowers a ceiling below the tenant's own value
            await set_ceilings(conn, settings.tenant, {"tokens_per_day": 100}, "operator:ops")
        key = bearer(await api_key(settings.tenant, "user-3", "user"))
        after = (await admin.get("/v1/quotas", headers=key)).json()
    assert answer["ceilings"] == {"running_sessions": 500, "sessions_per_minute": None, "commands_per_second": None,
                                  "tool_calls_in_flight": None, "tokens_per_day": 1000}
    assert answer["effective"]["running_sessions"] == 500 and answer["effective"]["tokens_per_day"] == 900
    assert after["own"]["tokens_per_day"] == 900 and after["effective"]["tokens_per_day"] == 100
