"""Who may do what, over every route the gateway serves, with real keys on the real database.

The matrix is built from the app's own OpenAPI paths, so a route added later without the
auth dependency fails here rather than shipping open. Commands go to a `FakeInbox`
(nothing reaches a live brain); writes are sent with `wait=false`, so an allowed one is
a 202 and a refused one is 401/403/404 with nothing sent.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from conftest_pg import fresh_tenant, owner_connection, service_connection
from gateway_harness import (
    FakeInbox, Seeder, answer_command, api_key, bearer, draft, gateway_settings, running_gateway, sealed,
)
from wakeline.log.chain import seal
from wakeline.contract.commands import DeleteSession
from wakeline.storage.pg import TenantPool
from wakeline_gateway.deps import get_inbox

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]
PUBLIC = {("GET", "/healthz")}
MARK = "needle-" + fresh_tenant()  # text only tenant A's sessions contain


def owned_by(principal: str, title: str) -> list:
    return [draft("session_created", f"c-{title}", config={"model": "scripted:demo"}, owner=f"user:{principal}",
                  title=title, actor=f"user:{principal}"),
            draft("user_message", actor=f"user:{principal}", text=f"{MARK} {title}"),
            # Ended, so a stream with until_end finishes (the in-process transport buffers whole answers).
            draft("session_ended", reason="completed")]


@pytest.fixture(scope="module")
async def world():
    settings = gateway_settings()
    tenant, other = settings.tenant, fresh_tenant()
    inbox = FakeInbox()
    async with running_gateway(settings, principal="alice") as (app, client):
        app.dependency_overrides[get_inbox] = lambda: inbox
        del client.headers["Authorization"]  # each request here presents its own key, or none
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
            seeder, foreign = Seeder(pool, tenant), Seeder(pool, other)
            alice = (await seeder.session(owned_by("alice", "alice-1")))[0].session_id
            bob = (await seeder.session(owned_by("bob", "bob-1")))[0].session_id
            eve = (await foreign.session(owned_by("eve", "eve-1")))[0].session_id
            revoked = await api_key(tenant, "alice", "user")
            async with owner_connection() as conn:
                await conn.execute("INSERT INTO api_key_revocations (key_id) VALUES ($1)", revoked.split("_")[1])
            keys = {name: bearer(await api_key(tenant, name, role))
                    for name, role in (("alice", "user"), ("bob", "user"), ("audrey", "auditor"),
                                       ("adam", "admin"), ("svc", "service"))}
            keys["revoked"] = bearer(revoked)
            keys["eve"] = bearer(await api_key(other, "eve", "admin"))  # the strongest foreign key
            keys["none"] = {}
            keys["garbage"] = {"Authorization": "Bearer not-a-key"}
            keys["wrong-secret"] = {"Authorization": keys["alice"]["Authorization"][:-4] + "AAAA"}
            yield dict(app=app, client=client, seeder=seeder, inbox=inbox, tenant=tenant, other=other,
                       ids=dict(alice=alice, bob=bob, eve=eve), keys=keys, pool=pool)


def routes(app) -> list[tuple[str, str]]:
    found = []
    for path, item in app.openapi()["paths"].items():
        found += [(method.upper(), path) for method in item if method in ("get", "post", "put", "delete")]
    return sorted(found)


def request_for(method: str, path: str, session_id: str) -> dict[str, Any]:
    url = path.replace("{session_id}", session_id).replace("{tool_call_id}", "tc-1")
    params: dict[str, Any] = {"wait": "false"} if method in ("POST", "DELETE") and "/sessions" in url else {}
    if url.endswith("/stream"):
        params["until_end"] = "true"
    body = {"/v1/sessions": {"message": "hello", "wait": False}, "/messages": {"text": "hi"},
            "/tool-results/tc-1": {"output": "done"}, "/v1/tenant/retention": {"keep_days": 3650},
            "/v1/quotas": {"commands_per_second": 1000}}
    json_body = next((b for suffix, b in body.items() if url.endswith(suffix)), None)
    return dict(method=method, url=url, params=params, json=json_body if method in ("POST", "PUT") else None)


async def call(client: httpx.AsyncClient, headers: dict, method: str, path: str, session_id: str) -> httpx.Response:
    return await client.request(headers=headers, **request_for(method, path, session_id))


def session_scoped(path: str) -> bool:
    return "{session_id}" in path


def is_write(method: str, path: str) -> bool:
    """Commands, and the harness streams: a harness reads calls in order to answer them, so
    reading them takes the write to the session (the pool: a service key) that answering does."""
    return (method in ("POST", "PUT", "DELETE") and path != "/v1/sessions") or path.endswith("/tool-calls/stream")


async def test_the_matrix_covers_every_route_the_app_serves(world) -> None:
    served = routes(world["app"])
    # Enough that a router forgotten in create_app would show: every module's routes are here.
    for expected in [("GET", "/v1/sessions/{session_id}/transcript"), ("GET", "/v1/sessions/{session_id}/stream"),
                     ("GET", "/v1/audit/events"), ("GET", "/v1/audit/access-log"),
                     ("DELETE", "/v1/sessions/{session_id}"),
                     ("POST", "/v1/sessions/{session_id}/tool-results/{tool_call_id}")]:
        assert expected in served
    assert len(served) >= 20


@pytest.mark.parametrize("who", ["none", "revoked", "garbage", "wrong-secret"])
async def test_without_a_valid_key_every_route_but_health_is_401_and_says_why(world, who) -> None:
    client, inbox = world["client"], world["inbox"]
    sent_before = len(inbox.sent)
    for method, path in routes(world["app"]):
        answer = await call(client, world["keys"][who], method, path, world["ids"]["alice"])
        if (method, path) in PUBLIC:
            assert answer.status_code == 200, path
            continue
        assert answer.status_code == 401, (who, method, path, answer.text)
        assert answer.headers["www-authenticate"].startswith("Bearer")
        detail = answer.json()["detail"]
        assert "key" in detail and MARK not in answer.text
        if who == "revoked":
            assert "revoked" in detail
    assert len(inbox.sent) == sent_before


async def test_another_tenants_admin_sees_nothing_of_this_tenant(world) -> None:
    client, ids = world["client"], world["ids"]
    statuses = {}
    for method, path in routes(world["app"]):
        answer = await call(client, world["keys"]["eve"], method, path, ids["alice"])
        statuses[(method, path)] = answer.status_code
        assert MARK not in answer.text.replace(f"{MARK} eve-1", ""), (method, path)
        assert ids["alice"] not in answer.text.replace(f"session {ids['alice']!r}", "") or answer.status_code == 404
        assert ids["bob"] not in answer.text and world["tenant"] not in answer.text, (method, path)
        if session_scoped(path) and (method, path) not in PUBLIC:
            assert answer.status_code == 404, (method, path, answer.text)
    # The foreign admin's own tenant works: its reads answer, with only its own rows.
    listed = (await client.get("/v1/sessions", headers=world["keys"]["eve"])).json()["data"]
    assert [s["session_id"] for s in listed] == [ids["eve"]]
    audit = (await client.get("/v1/audit/events", headers=world["keys"]["eve"])).json()["data"]
    assert {e["session_id"] for e in audit} == {ids["eve"]} and {e["tenant"] for e in audit} == {world["other"]}


async def test_a_user_on_another_users_session_gets_404_and_sees_only_its_own(world) -> None:
    client, ids, inbox = world["client"], world["ids"], world["inbox"]
    sent_before = len(inbox.sent)
    for method, path in routes(world["app"]):
        if not session_scoped(path):
            continue
        answer = await call(client, world["keys"]["bob"], method, path, ids["alice"])
        assert answer.status_code == 404, (method, path, answer.text)
        assert "alice-1" not in answer.text
    assert len(inbox.sent) == sent_before
    listed = (await client.get("/v1/sessions", headers=world["keys"]["bob"])).json()["data"]
    assert [s["session_id"] for s in listed] == [ids["bob"]]
    for path in ("/v1/audit/events", "/v1/audit/sessions", "/v1/audit/verify", "/v1/audit/access-log",
                 "/v1/tenant/retention"):
        refused = await client.get(path, headers=world["keys"]["bob"])
        assert refused.status_code == 403 and "role 'user'" in refused.json()["detail"]


async def test_an_auditor_reads_everything_and_writes_nothing(world) -> None:
    client, ids, inbox = world["client"], world["ids"], world["inbox"]
    sent_before = len(inbox.sent)
    reads = writes = 0
    for method, path in routes(world["app"]):
        answer = await call(client, world["keys"]["audrey"], method, path, ids["bob"])
        if is_write(method, path) or (method, path) == ("POST", "/v1/sessions"):
            writes += 1
            assert answer.status_code == 403, (method, path, answer.text)
        elif path != "/v1/audit/access-log":
            reads += 1
            assert answer.status_code == 200, (method, path, answer.text)
    assert len(inbox.sent) == sent_before and reads >= 9 and writes >= 9
    listed = (await client.get("/v1/sessions", headers=world["keys"]["audrey"])).json()["data"]
    assert {ids["alice"], ids["bob"]} <= {s["session_id"] for s in listed}


async def test_the_owner_and_a_service_may_write_and_each_command_carries_the_keys_identity(world) -> None:
    client, ids, inbox, tenant = world["client"], world["ids"], world["inbox"], world["tenant"]
    for who in ("alice", "svc"):
        answer = await client.post(f"/v1/sessions/{ids['alice']}/messages", params={"wait": "false"},
                                   json={"text": f"from {who}"}, headers=world["keys"][who])
        assert answer.status_code == 202, answer.text
    hands = await client.post(f"/v1/sessions/{ids['alice']}/takeover", params={"wait": "false"},
                              headers=world["keys"]["alice"])
    assert hands.status_code == 202
    sent = inbox.commands_for(ids["alice"])[-3:]
    assert [(c.tenant, c.actor) for c in sent] == [(tenant, "user:alice"), (tenant, "service:svc"),
                                                   (tenant, "human:alice")]
    # An admin administers, it does not take over someone else's conversation.
    refused = await client.post(f"/v1/sessions/{ids['alice']}/messages", params={"wait": "false"},
                                json={"text": "x"}, headers=world["keys"]["adam"])
    assert refused.status_code == 403 and "user:alice" in refused.json()["detail"]


async def test_a_request_cannot_choose_its_tenant_or_actor(world) -> None:
    client, inbox = world["client"], world["inbox"]
    answer = await client.post("/v1/sessions", json={"message": "x", "wait": False, "tenant": world["other"]},
                               headers=world["keys"]["alice"])
    assert answer.status_code == 422 and "tenant" in answer.text
    made = await client.post("/v1/sessions", json={"message": "x", "wait": False},
                             headers={**world["keys"]["alice"], "X-Tenant": world["other"]})
    assert made.status_code == 202
    command = inbox.commands_for(made.json()["session_id"])[0]
    assert (command.tenant, command.actor) == (world["tenant"], "user:alice")


async def test_deletion_owner_or_admin_only_rows_and_deleted_event_remain(world) -> None:
    client, seeder, inbox, keys = world["client"], world["seeder"], world["inbox"], world["keys"]
    history = await seeder.session(owned_by("alice", "to-delete"))
    sid = history[0].session_id
    for who, status in (("bob", 404), ("audrey", 403), ("svc", 403)):
        refused = await client.delete(f"/v1/sessions/{sid}", headers=keys[who])
        assert refused.status_code == status, (who, refused.text)
    assert inbox.commands_for(sid) == []

    respond = lambda cmd: [draft("deleted", by=cmd.actor, actor=cmd.actor)]  # noqa: E731
    answer, log = await asyncio.gather(client.delete(f"/v1/sessions/{sid}", headers=keys["adam"]),
                                       answer_command(inbox, seeder, sid, history, respond))
    [command] = inbox.commands_for(sid)
    assert isinstance(command, DeleteSession) and command.actor == "user:adam"
    assert answer.status_code == 200 and "NOT erased" in answer.json()["note"]
    for path in ("", "/events", "/transcript", "/export", "/replay", "/verify", "/stream"):
        for who in ("alice", "adam", "audrey"):
            assert (await client.get(f"/v1/sessions/{sid}{path}", headers=keys[who])).status_code == 404
    for who in ("alice", "adam"):
        listed = (await client.get("/v1/sessions", params={"limit": 200}, headers=keys[who])).json()["data"]
        assert sid not in {s["session_id"] for s in listed}
    # The rows stay, the deleted event among them, and the auditor can still find them.
    async with service_connection() as conn, conn.transaction():
        await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", world["tenant"])
        stored = await conn.fetch("SELECT seq, type, actor FROM events WHERE session_id = $1 ORDER BY seq", sid)
        marked = await conn.fetchrow("SELECT deleted_at, deleted_by FROM sessions WHERE session_id = $1", sid)
    assert [r["type"] for r in stored] == ["session_created", "user_message", "session_ended", "deleted"]
    assert stored[-1]["actor"] == "user:adam" and marked["deleted_by"] == "user:adam" and marked["deleted_at"]
    evidence = (await client.get("/v1/audit/events", params={"session_id": sid}, headers=keys["audrey"])).json()
    assert [e["type"] for e in evidence["data"]] == ["session_created", "user_message", "session_ended", "deleted"]
    assert log[-1].type == "deleted"


async def test_a_store_built_without_deletion_answers_501() -> None:
    settings = gateway_settings(deletion_enabled=False)
    async with running_gateway(settings, principal="alice") as (app, client):
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=1) as pool:
            sid = (await Seeder(pool, settings.tenant).session(owned_by("alice", "kept")))[0].session_id
        answer = await client.delete(f"/v1/sessions/{sid}")
        assert answer.status_code == 501 and "without deletion" in answer.json()["detail"]
        assert (await client.get(f"/v1/sessions/{sid}")).status_code == 200


# ---- audit queries -------------------------------------------------------------------------

def at(minutes: int) -> datetime:
    return datetime(2026, 6, 1, 12, 0, tzinfo=UTC) + timedelta(minutes=minutes)


async def seed_timeline(pool: TenantPool, tenant: str) -> dict[str, list]:
    """Two sessions with events at known times; alice approves and, as the hands, runs a tool."""
    seeder = Seeder(pool, tenant)
    plans = {
        "s1": [(0, "session_created", "user:alice", {"config": {}, "owner": "user:alice"}),
               (1, "tool_call", "agent:scripted:demo", {"tool_call_id": "t1", "name": "bash", "input": {}}),
               (2, "approval_granted", "user:alice", {"tool_call_id": "t1"}),
               (3, "tool_result", "runner:h", {"tool_call_id": "t1", "name": "bash", "output": "=cmd|' /C calc'!A0",
                                              "is_error": True}),
               (4, "takeover", "human:alice", {"by": "human:alice"}),
               (5, "tool_call", "agent:scripted:demo", {"tool_call_id": "t2", "name": "read_file", "input": {}}),
               (6, "tool_result", "human:alice", {"tool_call_id": "t2", "name": "read_file", "output": "ok"})],
        "s2": [(2, "session_created", "user:bob", {"config": {}, "owner": "user:bob"}),
               (3, "user_message", "user:bob", {"text": "hi"}),
               (12000, "approval_granted", "user:alice", {"tool_call_id": "x"})],  # 8 days later
    }
    out = {}
    for name, plan in plans.items():
        drafts = [draft(type_, f"c-{name}-{i}", actor=actor, **payload)
                  for i, (_, type_, actor, payload) in enumerate(plan)]
        events = sealed(drafts, f"{tenant}-{name}", tenant)
        events = [e.model_copy(update={"ts": at(plan[i][0])}) for i, e in enumerate(events)]
        # Re-seal with the chosen times so the chain stays valid.
        prev, resealed = events[0].prev_hash, []
        for d, e in zip(drafts, events):
            fixed = seal(d, session_id=e.session_id, tenant=tenant, seq=e.seq, prev_hash=prev, ts=e.ts,
                         event_id=e.event_id)
            resealed.append(fixed)
            prev = fixed.hash
        await seeder.insert(resealed, resealed)
        out[name] = resealed
    return out


@pytest.fixture(scope="module")
async def audit_world():
    settings = gateway_settings()
    async with running_gateway(settings, principal="audrey", role="auditor") as (app, client):
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
            timeline = await seed_timeline(pool, settings.tenant)
            admin = bearer(await api_key(settings.tenant, "adam", "admin"))
            yield dict(client=client, timeline=timeline, tenant=settings.tenant, admin=admin)


async def test_every_tool_call_a_person_approved_or_ran_in_a_week_in_one_call(audit_world) -> None:
    client = audit_world["client"]
    page = (await client.get("/v1/audit/events", params={
        "principal": "alice", "type": ["approval_granted", "tool_result"],
        "since": at(0).isoformat(), "until": (at(0) + timedelta(days=7)).isoformat()})).json()
    got = [(e["session_id"].rsplit("-", 1)[1], e["seq"], e["type"], e["actor"]) for e in page["data"]]
    assert got == [("s1", 3, "approval_granted", "user:alice"), ("s1", 7, "tool_result", "human:alice")]
    assert page["next_cursor"] is None


async def test_every_session_a_principal_touched_in_a_window(audit_world) -> None:
    client = audit_world["client"]
    window = {"since": at(0).isoformat(), "until": at(10).isoformat()}
    alice = (await client.get("/v1/audit/sessions", params={"principal": "alice", **window})).json()
    bob = (await client.get("/v1/audit/sessions", params={"actor": "user:bob", **window})).json()
    assert [s["session_id"].rsplit("-", 1)[1] for s in alice["data"]] == ["s1"]
    assert alice["data"][0]["actors"] == ["human:alice", "user:alice"] and alice["data"][0]["events"] == 4
    assert [s["session_id"].rsplit("-", 1)[1] for s in bob["data"]] == ["s2"]
    later = (await client.get("/v1/audit/sessions", params={"principal": "alice"})).json()
    assert {s["session_id"].rsplit("-", 1)[1] for s in later["data"]} == {"s1", "s2"}


async def test_one_type_across_all_sessions_and_tool_and_outcome_filters(audit_world) -> None:
    client = audit_world["client"]
    created_ = (await client.get("/v1/audit/events", params={"type": "session_created"})).json()["data"]
    assert [e["session_id"].rsplit("-", 1)[1] for e in created_] == ["s1", "s2"]
    failed = (await client.get("/v1/audit/events", params={"outcome": "error"})).json()["data"]
    assert [(e["type"], e["payload"]["name"]) for e in failed] == [("tool_result", "bash")]
    reads = (await client.get("/v1/audit/events", params={"tool": "read_file"})).json()["data"]
    assert [e["type"] for e in reads] == ["tool_call", "tool_result"]


async def test_keyset_pages_cover_everything_once_in_a_stable_order(audit_world) -> None:
    client, timeline = audit_world["client"], audit_world["timeline"]
    seen, cursor = [], None
    for _ in range(20):
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = (await client.get("/v1/audit/events", params=params)).json()
        seen += [(e["ts"], e["session_id"], e["seq"]) for e in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    expected = sorted((e.ts, e.session_id, e.seq) for events in timeline.values() for e in events)
    assert [(datetime.fromisoformat(t.replace("Z", "+00:00")), s, q) for t, s, q in seen] == expected
    bad = await client.get("/v1/audit/events", params={"cursor": "nope"})
    assert bad.status_code == 422 and "cursor" in bad.json()["detail"]
    naive = await client.get("/v1/audit/events", params={"since": "2026-06-01T00:00:00"})
    assert naive.status_code == 422 and "offset" in naive.json()["detail"]


async def test_exports_stream_jsonl_and_csv_with_formula_cells_defused(audit_world) -> None:
    client, timeline = audit_world["client"], audit_world["timeline"]
    total = sum(len(v) for v in timeline.values())
    jsonl = await client.get("/v1/audit/events/export", params={"format": "jsonl"})
    lines = [json.loads(line) for line in jsonl.text.splitlines()]
    assert jsonl.headers["content-type"].startswith("application/x-ndjson") and len(lines) == total
    assert {line["hash"] for line in lines} == {e.hash for v in timeline.values() for e in v}
    exported = await client.get("/v1/audit/events/export", params={"format": "csv", "outcome": "error"})
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert exported.headers["content-type"].startswith("text/csv") and len(rows) == 1
    assert rows[0]["type"] == "tool_result" and rows[0]["is_error"] == "True"
    assert json.loads(rows[0]["payload"])["output"].startswith("=cmd")  # inside JSON: not a formula cell
    assert not any(cell.startswith(("=", "+", "@")) for row in rows for cell in row.values())


async def test_audit_reads_are_logged_append_only_and_only_an_admin_reads_the_log(audit_world) -> None:
    client, tenant = audit_world["client"], audit_world["tenant"]
    marker = f"marker-{fresh_tenant()}"
    await client.get("/v1/audit/events", params={"tool": marker})
    refused = await client.get("/v1/audit/access-log")
    assert refused.status_code == 403
    log = (await client.get("/v1/audit/access-log", params={"limit": 1000}, headers=audit_world["admin"])).json()
    mine = [e for e in log["data"] if e["query"].get("tool") == marker]
    assert len(mine) == 1 and mine[0]["principal"] == "audrey" and mine[0]["role"] == "auditor"
    assert mine[0]["path"] == "/v1/audit/events" and re.fullmatch(r"[0-9a-f]{16}", mine[0]["key_id"])
    assert log["data"][-1]["path"] == "/v1/audit/access-log" and log["data"][-1]["principal"] == "adam"
    # Opening one session that is not its own is reading the trail too.
    sid = audit_world["timeline"]["s1"][0].session_id
    assert (await client.get(f"/v1/sessions/{sid}/transcript")).status_code == 200
    log = (await client.get("/v1/audit/access-log", params={"principal": "audrey", "limit": 1000},
                            headers=audit_world["admin"])).json()
    assert log["data"][-1]["path"] == f"/v1/sessions/{sid}/transcript"
    assert log["data"][-1]["query"] == {"session_id": sid}
    async with owner_connection() as conn, conn.transaction():
        await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", tenant)
        with pytest.raises(Exception, match="append-only"):
            await conn.execute("UPDATE audit_access_log SET principal = 'nobody' WHERE tenant = $1", tenant)


async def test_postgres_itself_shows_a_viewer_only_its_own_sessions_and_their_events(world) -> None:
    """The second line: even a query that forgets the owner gets only the viewer's rows."""
    pool, ids = world["pool"], world["ids"]
    async with pool.transaction(world["tenant"], viewer="user:bob") as conn:
        sessions = {r["session_id"] for r in await conn.fetch("SELECT session_id FROM sessions")}
        events = {r["session_id"] for r in await conn.fetch("SELECT DISTINCT session_id FROM events")}
    async with pool.transaction(world["tenant"]) as conn:  # no viewer: an auditor's or a service's view
        everyone = {r["session_id"] for r in await conn.fetch("SELECT session_id FROM sessions")}
    assert sessions == events == {ids["bob"]}
    assert {ids["alice"], ids["bob"]} <= everyone and ids["eve"] not in everyone


async def test_the_one_round_trip_session_read_is_scoped_like_a_transaction_and_leaves_no_scope(world) -> None:
    """`session_row` (0015) sets tenant and viewer itself: the same rows as a scoped
    transaction, nothing of another tenant or another user, and the connection's next
    statement runs with no tenant at all."""
    pool, ids, tenant = world["pool"], world["ids"], world["tenant"]

    async def row(conn, tenant: str, viewer: str, session_id: str):
        return await conn.fetchrow("SELECT * FROM session_row($1, $2, $3)", tenant, viewer, session_id)

    async with pool._acquire() as conn:  # one connection, outside any transaction, as the gateway calls it
        assert (await row(conn, tenant, "user:bob", ids["bob"]))["owner"] == "user:bob"
        assert await row(conn, tenant, "user:bob", ids["alice"]) is None  # another user's
        assert (await row(conn, tenant, "", ids["alice"]))["owner"] == "user:alice"  # no viewer: the whole tenant
        assert await row(conn, tenant, "", ids["eve"]) is None  # another tenant's
        assert await row(conn, world["other"], "", ids["alice"]) is None
        assert await conn.fetchval("SELECT coalesce(current_setting('wakeline.tenant', true), '')") == ""
        assert await conn.fetchval("SELECT count(*) FROM sessions") == 0  # no scope survived the call
        with pytest.raises(Exception, match="tenant is required"):
            await row(conn, "", "", ids["alice"])
    async with pool.transaction(tenant, viewer="user:alice") as conn:
        as_transaction = await conn.fetchrow("SELECT * FROM sessions WHERE session_id = $1", ids["alice"])
    async with pool._acquire() as conn:
        one_trip = await row(conn, tenant, "user:alice", ids["alice"])
    assert dict(one_trip) == {k: v for k, v in dict(as_transaction).items() if k in dict(one_trip)}


async def test_the_key_and_its_session_come_in_one_round_trip_under_the_keys_scope(world) -> None:
    """`key_and_session` (0021): the stored key as `api_key_lookup` gives it, and the session
    under the scope that key gives (a user sees only its own, another tenant nothing), no
    row at all for an unknown key, and no scope left on the connection."""
    store, ids, keys = world["app"].state.store, world["ids"], world["keys"]

    def key_id(name: str) -> str:
        return keys[name]["Authorization"].split("_")[1]

    bob, row = await store.key_and_session(key_id("bob"), ids["bob"])
    assert (bob.principal, bob.role, bob.revoked) == ("bob", "user", False) and row["owner"] == "user:bob"
    assert set(row) == {"session_id", "owner", "title", "model", "status", "last_seq", "created_at", "updated_at",
                        "ended_reason", "parent_session_id", "fork_seq", "deleted_at", "deleted_by"}
    assert (await store.key_and_session(key_id("bob"), ids["alice"]))[1] is None  # another user's
    assert (await store.key_and_session(key_id("svc"), ids["alice"]))[1]["owner"] == "user:alice"
    assert (await store.key_and_session(key_id("audrey"), ids["bob"]))[1]["owner"] == "user:bob"
    eve, foreign = await store.key_and_session(key_id("eve"), ids["alice"])
    assert eve.tenant == world["other"] and foreign is None  # the strongest key of another tenant
    assert await store.key_and_session("0" * 16, ids["alice"]) == (None, None)
    revoked, _ = await store.key_and_session(key_id("revoked"), ids["alice"])
    assert revoked.revoked  # handed back as stored: caller_for refuses it, and the row with it
    assert await store.key_and_session(key_id("alice"), "no-such-session") == (await store.api_key(key_id("alice")),
                                                                               None)
    async with world["pool"]._acquire() as conn:
        await conn.fetchrow("SELECT * FROM key_and_session($1, $2)", key_id("svc"), ids["alice"])
        assert await conn.fetchval("SELECT coalesce(current_setting('wakeline.tenant', true), '')") == ""
        assert await conn.fetchval("SELECT count(*) FROM sessions") == 0


async def test_a_session_route_reads_the_key_and_the_session_in_one_statement(world, monkeypatch) -> None:
    """A command's reads before it is sent: one statement, not a key look-up and then a
    session read; other routes still look the key up alone."""
    store, calls = world["app"].state.store, []
    for name in ("api_key", "session", "key_and_session"):
        original = getattr(store, name)

        async def counted(*args, _name=name, _original=original):
            calls.append(_name)
            return await _original(*args)
        monkeypatch.setattr(store, name, counted)
    client, alice = world["client"], world["keys"]["alice"]
    assert (await client.get(f"/v1/sessions/{world['ids']['alice']}", headers=alice)).status_code == 200
    assert calls == ["key_and_session"]
    calls.clear()
    answer = await client.post(f"/v1/sessions/{world['ids']['alice']}/messages", headers=alice,
                               params={"wait": "false"}, json={"text": "hi"})
    assert answer.status_code == 202 and calls == ["key_and_session"]
    calls.clear()
    assert (await client.get(f"/v1/sessions/{world['ids']['bob']}", headers=alice)).status_code == 404
    assert calls == ["key_and_session"]
    calls.clear()
    assert (await client.get("/v1/sessions", headers=alice)).status_code == 200
    assert calls == ["api_key"]


async def test_an_admin_sets_the_tenant_window_and_every_change_is_kept(world) -> None:
    client, keys, tenant = world["client"], world["keys"], world["tenant"]
    first = await client.put("/v1/tenant/retention", json={"keep_days": 400}, headers=keys["adam"])
    second = await client.put("/v1/tenant/retention", json={"keep_days": 90}, headers=keys["adam"])
    assert first.status_code == second.status_code == 200
    seen = (await client.get("/v1/tenant/retention", headers=keys["audrey"])).json()
    assert (seen["keep_days"], seen["set_by"]) == (90, "user:adam")
    assert [(h["keep_days"], h["set_by"]) for h in seen["history"]][-2:] == [(400, "user:adam"), (90, "user:adam")]
    for who in ("audrey", "alice", "svc"):
        assert (await client.put("/v1/tenant/retention", json={"keep_days": 1}, headers=keys[who])).status_code == 403
    bad = await client.put("/v1/tenant/retention", json={"keep_days": 0}, headers=keys["adam"])
    assert bad.status_code == 422 and "keep_days" in bad.text
    foreign = (await client.get("/v1/tenant/retention", headers=keys["eve"])).json()
    # eve's own tenant: untouched by adam (the matrix gave it a window of its own, set by eve).
    assert foreign["keep_days"] != 90 and {h["set_by"] for h in foreign["history"]} <= {"user:eve"}
    async with owner_connection() as conn, conn.transaction():
        await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", tenant)
        with pytest.raises(Exception, match="append-only"):
            await conn.execute("DELETE FROM retention_policy_changes WHERE tenant = $1", tenant)


async def test_keys_never_reach_the_logs(world, caplog) -> None:
    """Neither a good key nor a bad one is written to any log, at any level."""
    client, keys = world["client"], world["keys"]
    secrets = [keys[who]["Authorization"].split("_", 2)[2] for who in ("alice", "wrong-secret", "revoked")]
    with caplog.at_level("DEBUG"):
        answers = [await client.get("/v1/sessions", headers=keys[who]) for who in ("alice", "wrong-secret", "revoked")]
    assert [a.status_code for a in answers] == [200, 401, 401]
    assert caplog.records, "nothing was logged at all: the check below would prove nothing"
    logged = caplog.text + "".join(a.text for a in answers)
    assert not any(secret in logged for secret in secrets)
