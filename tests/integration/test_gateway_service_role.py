"""The `service` role is a service: what it reads of other principals' sessions is in the
access log like an auditor's, and what it does as the hands is recorded as
`service:<principal>`, never as a person.

The real gateway app and the real Postgres. Commands go to a `FakeInbox` and the test
plays the brain with the brain's own pure `handle_input` over the folded log, so the
events stored are the ones a running brain would write for the command the gateway sent.
"""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from gateway_harness import FakeInbox, Seeder, api_key, bearer, draft, gateway_settings, running_gateway
from wakeline.contract.events import Event
from wakeline.log.fold import fold
from wakeline.storage.pg import TenantPool
from wakeline.agent.inputs import handle_input
from wakeline_gateway.deps import get_inbox

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]
SESSION_READS = ("", "/events", "/transcript", "/export", "/replay", "/verify")


def key_id(key: str) -> str:
    return key.split("_")[1]


@pytest.fixture(scope="module")
async def world():
    settings = gateway_settings(wait_timeout_s=5.0, outcome_recheck_s=0.05)
    inbox = FakeInbox()
    async with running_gateway(settings, principal="alice") as (app, client):
        app.dependency_overrides[get_inbox] = lambda: inbox
        del client.headers["Authorization"]  # each request presents its own key
        made = {name: await api_key(settings.tenant, name, role)
                for name, role in (("alice", "user"), ("svc", "service"), ("audrey", "auditor"), ("adam", "admin"))}
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
            yield dict(client=client, inbox=inbox, seeder=Seeder(pool, settings.tenant), tenant=settings.tenant,
                       keys={name: bearer(key) for name, key in made.items()},
                       key_ids={name: key_id(key) for name, key in made.items()})


async def seeded(world, owner: str, tool_call_id: str | None = None, ended: bool = False) -> list[Event]:
    """A session of `owner`, with a tool call pending when `tool_call_id` is given; an ended
    one lets a stream with `until_end` finish (the in-process transport buffers answers)."""
    drafts = [draft("session_created", f"cmd-{uuid.uuid4()}", config={"model": "scripted:demo"}, owner=owner,
                    title="t", actor=owner),
              draft("user_message", actor=owner, text="list the files")]
    if tool_call_id is not None:
        drafts.append(draft("tool_call", tool_call_id=tool_call_id, name="list_files", input={"path": "."}))
    if ended:
        drafts.append(draft("session_ended", reason="completed"))
    return await world["seeder"].session(drafts)


async def brain_answers(world, history: list[Event]) -> list[Event]:
    """Plays the brain once: the session's next command, handled by the brain's own code."""
    session_id = history[0].session_id
    command = await world["inbox"].next_unanswered(session_id)
    return await world["seeder"].append(session_id, handle_input(fold(history), command), history)


async def command(world, who: str, history: list[Event], path: str, **request) -> tuple[httpx.Response, list[Event]]:
    """POSTs one command as `who` and records the brain's answer to it."""
    url = f"/v1/sessions/{history[0].session_id}{path}"
    answer, log = await asyncio.gather(world["client"].post(url, headers=world["keys"][who], **request),
                                       brain_answers(world, history))
    assert answer.status_code in (200, 202) and answer.json()["status"] == "done", answer.text  # a message: 202
    return answer, log


async def access_log(world, principal: str) -> list[dict]:
    log = await world["client"].get("/v1/audit/access-log", params={"principal": principal, "limit": 1000},
                                    headers=world["keys"]["adam"])
    assert log.status_code == 200, log.text
    return log.json()["data"]


async def hands_on(world, who: str) -> list[Event]:
    """`who` takes over alice's session, answers its pending tool call and hands back."""
    history = await seeded(world, "user:alice", tool_call_id="tc-1")
    _, history = await command(world, who, history, "/takeover")
    _, history = await command(world, who, history, "/tool-results/tc-1", json={"output": "a.txt\nb.txt"})
    _, history = await command(world, who, history, "/handback")
    return history


# ---- reads ---------------------------------------------------------------------------------

async def test_a_service_reading_another_principals_session_is_in_the_access_log(world) -> None:
    client, keys = world["client"], world["keys"]
    sid = (await seeded(world, "user:alice", ended=True))[0].session_id
    for path in SESSION_READS + ("/stream",):
        params = {"until_end": "true"} if path == "/stream" else {}
        answer = await client.get(f"/v1/sessions/{sid}{path}", params=params, headers=keys["svc"])
        assert answer.status_code == 200, (path, answer.text)
    logged = [e for e in await access_log(world, "svc") if e["query"] == {"session_id": sid}]
    assert [e["path"] for e in logged] == [f"/v1/sessions/{sid}{p}" for p in SESSION_READS + ("/stream",)]
    assert {(e["principal"], e["role"], e["key_id"], e["method"]) for e in logged} == {
        ("svc", "service", world["key_ids"]["svc"], "GET")}


async def test_a_services_access_log_entry_has_an_auditors_fields(world) -> None:
    client, keys = world["client"], world["keys"]
    sid = (await seeded(world, "user:alice"))[0].session_id
    for who in ("audrey", "svc"):
        assert (await client.get(f"/v1/sessions/{sid}/transcript", headers=keys[who])).status_code == 200
    [auditor] = [e for e in await access_log(world, "audrey") if e["query"] == {"session_id": sid}]
    [service] = [e for e in await access_log(world, "svc") if e["query"] == {"session_id": sid}]
    assert set(auditor) == set(service)
    same = ("method", "path", "query")
    assert [auditor[k] for k in same] == [service[k] for k in same]
    assert (auditor["role"], service["role"]) == ("auditor", "service")


async def test_a_service_reading_its_own_session_is_not_logged_and_a_user_reading_hers_neither(world) -> None:
    client, keys = world["client"], world["keys"]
    own = (await seeded(world, "service:svc"))[0].session_id
    hers = (await seeded(world, "user:alice"))[0].session_id
    assert (await client.get(f"/v1/sessions/{own}/events", headers=keys["svc"])).status_code == 200
    assert (await client.get(f"/v1/sessions/{hers}/events", headers=keys["alice"])).status_code == 200
    logged = {e["query"].get("session_id") for who in ("svc", "alice") for e in await access_log(world, who)}
    assert own not in logged and hers not in logged


async def test_a_services_write_to_another_principals_session_is_logged_too(world) -> None:
    history = await seeded(world, "user:alice")
    await command(world, "svc", history, "/messages", json={"text": "from the integration"})
    logged = [e for e in await access_log(world, "svc") if e["query"] == {"session_id": history[0].session_id}]
    assert [(e["method"], e["path"]) for e in logged] == [("POST", f"/v1/sessions/{history[0].session_id}/messages")]


# ---- the hands -----------------------------------------------------------------------------

@pytest.mark.parametrize(("who", "actor"), [("svc", "service:svc"), ("alice", "human:alice")])
async def test_takeover_tool_result_and_handback_carry_the_keys_kind_of_actor(world, who, actor) -> None:
    history = await hands_on(world, who)
    stored = (await world["client"].get(f"/v1/sessions/{history[0].session_id}/events",
                                        params={"after": 3}, headers=world["keys"]["alice"])).json()["data"]
    assert [(e["type"], e["actor"]) for e in stored] == [("takeover", actor), ("tool_result", actor),
                                                         ("handback", actor)]
    assert stored[0]["payload"]["by"] == stored[2]["payload"]["by"] == actor
    assert stored[1]["trust"] == "data" and stored[1]["payload"]["output"] == "a.txt\nb.txt"
    transcript = (await world["client"].get(f"/v1/sessions/{history[0].session_id}/transcript",
                                            params={"format": "markdown"}, headers=world["keys"]["alice"])).text
    assert f"{actor} took over as the hands" in transcript


async def test_an_audit_query_by_principal_finds_what_the_service_did(world) -> None:
    client, keys = world["client"], world["keys"]
    history = await hands_on(world, "svc")
    sid = history[0].session_id
    found = (await client.get("/v1/audit/events", params={"principal": "svc", "session_id": sid},
                              headers=keys["audrey"])).json()["data"]
    assert [(e["type"], e["actor"]) for e in found] == [("takeover", "service:svc"), ("tool_result", "service:svc"),
                                                        ("handback", "service:svc")]
    as_a_person = (await client.get("/v1/audit/events", params={"actor": "human:svc", "session_id": sid},
                                    headers=keys["audrey"])).json()["data"]
    assert as_a_person == []
    touched = (await client.get("/v1/audit/sessions", params={"principal": "svc"},
                                headers=keys["audrey"])).json()["data"]
    [row] = [s for s in touched if s["session_id"] == sid]
    assert (row["owner"], row["actors"]) == ("user:alice", ["service:svc"])


# ---- what it may not do --------------------------------------------------------------------

async def test_a_service_may_not_delete_audit_read_the_access_log_or_touch_retention(world) -> None:
    client, keys, inbox = world["client"], world["keys"], world["inbox"]
    sid = (await seeded(world, "service:svc"))[0].session_id  # not even its own session
    refused = [await client.delete(f"/v1/sessions/{sid}", headers=keys["svc"])]
    for path in ("/v1/audit/events", "/v1/audit/events/export", "/v1/audit/sessions", "/v1/audit/verify",
                 "/v1/audit/access-log", "/v1/tenant/retention"):
        refused.append(await client.get(path, headers=keys["svc"]))
    refused.append(await client.put("/v1/tenant/retention", json={"keep_days": 30}, headers=keys["svc"]))
    assert [(r.request.method, r.status_code) for r in refused] == [(r.request.method, 403) for r in refused]
    assert all("role 'service'" in r.json()["detail"] for r in refused)
    assert inbox.commands_for(sid) == []
