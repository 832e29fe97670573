"""The gateway's reads against the real Postgres: sessions, events by position, transcript,
export, replay, verify and the live stream, on sessions seeded as sealed events."""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import timedelta
from html.parser import HTMLParser

import pytest

from conftest_pg import fresh_month, fresh_tenant, owner_connection, superuser_connection
from gateway_harness import (
    OWNER, Seeder, api_key, bearer, created, draft, gateway_settings, running_gateway, sealed,
)
from tampering import guards_off
from tests import factories
from wakeline.evidence import witnesses
from wakeline.contract.events import ForkedPayload, SessionConfig
from wakeline.contract.events import parse_event
from wakeline.log.fold import fold
from wakeline.storage.pg import TenantPool
from wakeline.evidence.proofs import InclusionProof, check_proof
from wakeline.ops.retention import RetentionSettings, apply_retention
from wakeline.runtime.settings import CommonSettings
from wakeline.evidence.signing_round import sign_round
from wakeline.evidence.signing import SeedSigner
from wakeline_gateway.replay import state_json
from wakeline_gateway.transcript.html import ALLOWED_TAGS, CSP

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]
HOSTILE = '<script>alert(1)</script><img src=x onerror=alert(1)><a href="javascript:alert(1)">x</a>'


@pytest.fixture(scope="module")
async def gw():
    settings = gateway_settings()
    async with running_gateway(settings) as (app, client):
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
            yield app, client, Seeder(pool, settings.tenant)


def one_turn(n: int = 1) -> list:
    call_id = f"tc-{uuid.uuid4().hex[:8]}"
    return [
        draft("user_message", f"cmd-{uuid.uuid4()}", text=f"question {n}"),
        draft("turn_started", turn=n),
        draft("model_turn", text="Let me look.", stop_reason="tool_use", tool_call_ids=[call_id]),
        draft("tool_call", name="bash", tool_call_id=call_id, input={"cmd": "cat notes.txt"}),
        draft("tool_result", f"result:{call_id}", tool_call_id=call_id, name="bash", output=HOSTILE),
        draft("model_turn", text=f"answer {n}"),
        draft("turn_ended", turn=n),
    ]


async def test_get_session_returns_the_projection_and_404_names_unknown_ids(gw) -> None:
    _, client, seeder = gw
    events = await seeder.session([created(title="hello")])
    found = await client.get(f"/v1/sessions/{events[0].session_id}")
    missing = await client.get("/v1/sessions/no-such-session")
    assert found.status_code == 200
    assert found.json() | {"created_at": None, "updated_at": None} == {
        "session_id": events[0].session_id, "owner": "user:local", "title": "hello", "model": "scripted:demo",
        "status": "idle", "last_seq": 1, "created_at": None, "updated_at": None, "ended_reason": None,
        "parent_session_id": None, "fork_seq": None, "pending_client_calls": []}
    assert missing.status_code == 404 and "no-such-session" in missing.json()["detail"]


async def test_deleted_session_disappears_from_every_read(gw) -> None:
    _, client, seeder = gw
    events = await seeder.session([created(), draft("deleted", "cmd-del", actor="user:local", by="user:local")])
    sid = events[0].session_id
    paths = ["", "/events", "/transcript", "/export", "/replay", "/verify", "/stream"]
    statuses = [(await client.get(f"/v1/sessions/{sid}{path}")).status_code for path in paths]
    listed = (await client.get("/v1/sessions", params={"limit": 200})).json()["data"]
    assert statuses == [404] * len(paths)
    assert sid not in {s["session_id"] for s in listed}


async def test_events_after_reads_forward_and_before_is_the_lead_up(gw) -> None:
    _, client, seeder = gw
    events = await seeder.session([created()] + one_turn(1) + one_turn(2))
    sid = events[0].session_id
    forward = (await client.get(f"/v1/sessions/{sid}/events", params={"after": 2, "limit": 3})).json()
    lead_up = (await client.get(f"/v1/sessions/{sid}/events", params={"before": 8, "limit": 3})).json()
    bounded = (await client.get(f"/v1/sessions/{sid}/events", params={"after": 6, "before": 8})).json()
    assert [e["seq"] for e in forward["data"]] == [3, 4, 5]
    assert [e["seq"] for e in lead_up["data"]] == [5, 6, 7] and lead_up["count"] == 3
    assert [e["seq"] for e in bounded["data"]] == [7]


async def test_events_filter_by_type(gw) -> None:
    _, client, seeder = gw
    events = await seeder.session([created()] + one_turn(1) + one_turn(2))
    got = (await client.get(f"/v1/sessions/{events[0].session_id}/events",
                            params=[("type", "tool_call"), ("type", "tool_result")])).json()
    assert [(e["seq"], e["type"]) for e in got["data"]] == [
        (5, "tool_call"), (6, "tool_result"), (12, "tool_call"), (13, "tool_result")]


@pytest.mark.parametrize("params, where", [
    ({"limit": 0}, "query.limit"), ({"limit": 5000}, "query.limit"), ({"after": -1}, "query.after"),
    ({"before": 0}, "query.before"), ({"after": 5, "before": 5}, "after (5) must be less than before (5)"),
    ({"type": "nonsense"}, "query.type"), ({"limit": "ten"}, "query.limit"), ({"colour": "red"}, "colour"),
])
async def test_bad_event_params_answer_422_naming_the_problem(gw, params, where) -> None:
    _, client, seeder = gw
    events = await seeder.session([created()])
    answer = await client.get(f"/v1/sessions/{events[0].session_id}/events", params=params)
    assert answer.status_code == 422
    assert where in answer.json()["detail"]


async def test_transcript_formats_skip_markers_and_escape_tool_output(gw) -> None:
    _, client, seeder = gw
    events = await seeder.session([created(title='<b>"t"</b>')] + one_turn(1))
    base = f"/v1/sessions/{events[0].session_id}/transcript"
    as_json = (await client.get(base)).json()
    markdown = await client.get(base, params={"format": "markdown"})
    page = await client.get(base, params={"format": "html"})
    assert [e["type"] for e in as_json["entries"]] == [
        "session_created", "user_message", "model_turn", "tool_call", "tool_result", "model_turn"]
    assert markdown.headers["content-type"].startswith("text/markdown") and "answer 1" in markdown.text
    assert page.headers["content-security-policy"] == CSP
    assert f'content="{CSP}"' in page.text
    assert "<script" not in page.text.lower() and "&lt;script&gt;" in page.text
    tags = _tags(page.text)
    assert {name for name, _ in tags} <= ALLOWED_TAGS
    assert not [a for _, attrs in tags for a, _ in attrs if a.startswith("on") or a in ("href", "src")]


async def test_transcript_rejects_an_unknown_format(gw) -> None:
    _, client, seeder = gw
    events = await seeder.session([created()])
    answer = await client.get(f"/v1/sessions/{events[0].session_id}/transcript", params={"format": "pdf"})
    assert answer.status_code == 422 and "query.format" in answer.json()["detail"]


async def test_export_round_trips_through_parse_event(gw) -> None:
    _, client, seeder = gw
    events = await seeder.session([created()] + one_turn(1))
    answer = await client.get(f"/v1/sessions/{events[0].session_id}/export")
    lines = answer.text.splitlines()
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    assert [parse_event(line) for line in lines] == events


async def test_replay_gives_the_folded_state_after_each_event(gw) -> None:
    _, client, seeder = gw
    events = await seeder.session([created()] + one_turn(1))
    replay = (await client.get(f"/v1/sessions/{events[0].session_id}/replay")).json()
    assert [(s["seq"], s["type"]) for s in replay["data"]] == [(e.seq, e.type) for e in events]
    assert replay["data"][-1]["state"] == state_json(fold(events))
    assert replay["data"][3]["state"]["in_turn"] is True and replay["data"][3]["state"]["turns"] == 1


async def test_replay_check_runs_the_history_through_todays_brain_and_names_the_first_divergence(gw) -> None:
    _, client, seeder = gw
    clean = await seeder.session([created(), draft("user_message", f"cmd-{uuid.uuid4()}", text="hello")])
    found = (await client.get(f"/v1/sessions/{clean[0].session_id}/replay", params={"check": "true"})).json()
    assert found["check"] == {"clean": True, "events": 2, "divergence": None}
    assert (await client.get(f"/v1/sessions/{clean[0].session_id}/replay")).json()["check"] is None
    # one_turn's bash call says {"cmd": …}: today's brain answers input that does not fit the
    # tool with an error result of its own, where this log holds the runner's output.
    old = await seeder.session([created()] + one_turn(1))
    found = (await client.get(f"/v1/sessions/{old[0].session_id}/replay", params={"check": "true"})).json()
    assert found["check"]["clean"] is False and found["check"]["events"] == len(old)
    divergence = found["check"]["divergence"]
    assert divergence["seq"] == 6 and "invalid_input" in divergence["now"] and "tool_result" in divergence["recorded"]
    assert found["count"] == len(old)  # the folded states are still there beside the verdict


async def test_verify_reports_an_intact_chain(gw) -> None:
    _, client, seeder = gw
    events = await seeder.session([created()] + one_turn(1))
    report = (await client.get(f"/v1/sessions/{events[0].session_id}/verify")).json()
    picked = {k: report[k] for k in ("session_id", "ok", "first_bad_seq", "events", "last_seq", "problems")}
    assert picked == {"session_id": events[0].session_id, "ok": True, "first_bad_seq": None, "events": 8,
                      "last_seq": 8, "problems": []}


async def test_verify_names_the_first_event_whose_link_is_broken(gw) -> None:
    _, client, seeder = gw
    sid = str(uuid.uuid4())
    good = sealed([created(), draft("user_message", "c1", text="one")], sid, seeder.tenant)
    forged = sealed([draft("user_message", "c2", text="two")], sid, seeder.tenant, after=good[0])[0]
    forged = forged.model_copy(update={"seq": 3})  # linked to seq 1, hashed as seq 2: both wrong
    await seeder.insert(good, good)
    await seeder.insert(good, [forged])
    report = (await client.get(f"/v1/sessions/{sid}/verify")).json()
    assert (report["ok"], report["first_bad_seq"], report["events"]) == (False, 3, 3)


async def test_list_sessions_is_newest_first_pages_by_cursor_and_skips_deleted(gw) -> None:
    app, client, seeder = gw
    tenant = fresh_tenant()
    own = Seeder(seeder.pool, tenant)
    ids = [(await own.session([created(title=f"s{i}")]))[0].session_id for i in range(3)]
    await own.session([created(), draft("deleted", "cmd-d", by="user:local")])
    own_key = bearer(await api_key(tenant, "local", "user"))
    first = (await client.get("/v1/sessions", params={"limit": 2}, headers=own_key)).json()
    rest = (await client.get("/v1/sessions", params={"limit": 2, "cursor": first["next_cursor"]},
                             headers=own_key)).json()
    bad = await client.get("/v1/sessions", params={"cursor": "not-a-cursor"}, headers=own_key)
    assert [s["session_id"] for s in first["data"] + rest["data"]] == ids[::-1]
    assert rest["next_cursor"] is None
    assert bad.status_code == 422 and "cursor" in bad.json()["detail"]


async def test_list_sessions_filters_in_postgres_and_shows_what_each_cost(gw) -> None:
    _, client, seeder = gw
    own = Seeder(seeder.pool, fresh_tenant())
    alpha = (await own.session([
        created(title="Alpha 100%_done"), draft("user_message", "c1", text="hi"), draft("turn_started", turn=1),
        draft("model_turn", text="a", usage={"input_tokens": 100, "output_tokens": 20}),
        draft("model_turn", text="b", usage={"input_tokens": 50, "output_tokens": 10, "cache_read_input_tokens": 30}),
        draft("turn_ended", turn=1)]))[0].session_id
    beta = (await own.session([created(title="beta"), draft("session_ended", reason="completed")]))[0].session_id
    gamma = (await own.session([draft("session_created", "cmd-g", config={"model": "claude-x"}, owner="user:bob",
                                      title="gamma", actor="user:bob")]))[0].session_id
    key = bearer(await api_key(own.tenant, "aud", "auditor"))  # the whole tenant: bob's session too

    async def listed(**params: str) -> list[str]:
        answer = await client.get("/v1/sessions", params=params, headers=key)
        assert answer.status_code == 200, answer.text
        return [s["session_id"] for s in answer.json()["data"]]

    assert await listed() == [gamma, beta, alpha]
    assert await listed(status="ended") == [beta]
    assert await listed(status="idle") == [gamma, alpha]
    assert await listed(status="running") == []
    assert await listed(owner="BOB") == [gamma] and await listed(model="claude") == [gamma]
    assert await listed(q="0%_d") == [alpha] and await listed(q="%") == [alpha]  # % and _ are literal
    assert await listed(q="alpha", status="ended") == []
    page = (await client.get("/v1/sessions", params={"limit": 1, "status": "idle"}, headers=key)).json()
    rest = (await client.get("/v1/sessions", params={"cursor": page["next_cursor"], "status": "idle"},
                             headers=key)).json()
    assert [s["session_id"] for s in page["data"] + rest["data"]] == [gamma, alpha]  # the filter pages too
    costs = {s["session_id"]: s["cost"] for s in rest["data"] + page["data"]}
    assert costs[alpha] == {"model_calls": 2, "input_tokens": 180, "output_tokens": 30}
    assert costs[gamma] == {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}
    for bad in ({"status": "waiting"}, {"status": "deleted"}, {"owner": ""}, {"q": "x" * 201}, {"sort": "title"}):
        answer = await client.get("/v1/sessions", params=bad, headers=key)
        assert answer.status_code == 422 and answer.json()["errors"], (bad, answer.text)


async def test_stream_sends_each_event_as_a_frame_and_ends_after_session_ended(gw) -> None:
    _, client, seeder = gw
    events = await seeder.session([created(), draft("user_message", "c1", text="hi"),
                                   draft("session_ended", reason="completed")])
    answer = await client.get(f"/v1/sessions/{events[0].session_id}/stream", params={"until_end": "true"})
    frames = _frames(answer.text)
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert [(f["id"], f["event"]) for f in frames] == [("1", "session_created"), ("2", "user_message"),
                                                        ("3", "session_ended")]
    assert parse_event(frames[1]["data"]) == events[1]


async def test_stream_resumes_after_last_event_id(gw) -> None:
    _, client, seeder = gw
    events = await seeder.session([created(), draft("user_message", "c1", text="hi"),
                                   draft("session_ended", reason="completed")])
    sid = events[0].session_id
    resumed = await client.get(f"/v1/sessions/{sid}/stream", params={"until_end": "true"},
                               headers={"Last-Event-ID": "2"})
    bad = await client.get(f"/v1/sessions/{sid}/stream", headers={"Last-Event-ID": "two"})
    assert [f["id"] for f in _frames(resumed.text)] == ["3"]
    assert bad.status_code == 422 and "Last-Event-ID" in bad.json()["detail"]


async def test_stream_until_end_reads_past_an_end_that_a_message_continued(gw) -> None:
    _, client, seeder = gw
    events = await seeder.session([created(), draft("session_ended", reason="completed"),
                                   draft("user_message", "c2", text="one more thing"), draft("woke", host="h",
                                   reason="requested", from_seq=3), draft("session_ended", reason="max_turns")])
    stream = f"/v1/sessions/{events[0].session_id}/stream"
    whole = await client.get(stream, params={"until_end": "true"})
    finished = await client.get(stream, params={"until_end": "true"}, headers={"Last-Event-ID": "5"})
    assert [f["id"] for f in _frames(whole.text)] == ["1", "2", "3", "4", "5"]
    assert _frames(finished.text) == []


async def test_stream_tails_events_appended_while_it_is_open(gw, monkeypatch) -> None:
    app, client, seeder = gw
    history = await seeder.session([created()])
    sid = history[0].session_id
    read_history, stored = asyncio.Event(), app.state.store.events

    async def events(scope, session_id, query):  # the stream's first read of Postgres is its history
        found = await stored(scope, session_id, query)
        if session_id == sid:
            read_history.set()
        return found
    monkeypatch.setattr(app.state.store, "events", events)
    reading = asyncio.create_task(client.get(f"/v1/sessions/{sid}/stream", params={"until_end": "true"}))
    # Appended only once the stream has read what was stored: it can see them only by tailing.
    await asyncio.wait_for(read_history.wait(), 10)
    history = await seeder.append(sid, [draft("user_message", "c1", text="later")], history)
    await seeder.append(sid, [draft("session_ended", reason="cancelled")], history)
    answer = await asyncio.wait_for(reading, timeout=10)
    assert [f["event"] for f in _frames(answer.text)] == ["session_created", "user_message", "session_ended"]


async def test_healthz_reports_postgres(gw) -> None:
    _, client, _ = gw
    assert (await client.get("/healthz")).json() == {"ok": True, "postgres": "ok"}


def _frames(text: str) -> list[dict[str, str]]:
    frames = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if fields:
            frames.append(fields)
    return frames


def _tags(page: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    class Collector(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

        def handle_starttag(self, tag, attrs):
            self.tags.append((tag, attrs))

    collector = Collector()
    collector.feed(page)
    return collector.tags


async def test_the_proof_endpoint_serves_an_inclusion_proof_the_public_key_alone_checks(gw, tmp_path) -> None:
    _, client, seeder = gw
    events = await seeder.session([created()] + one_turn(1))
    sid = events[0].session_id
    before = await client.get(f"/v1/sessions/{sid}/proof")
    assert before.status_code == 200 and before.json()["proof"] is None and "no signed checkpoint" in \
        before.json()["reason"]
    settings = CommonSettings()  # the signer publishes as the admin tool principal
    await witnesses.ensure_topic(settings)
    signer = SeedSigner(os.urandom(32))
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=1) as pool:
        await sign_round(pool, signer, seeder.tenant, settings, tmp_path / "sink")
    answer = await client.get(f"/v1/sessions/{sid}/proof")
    assert answer.status_code == 200
    proof = InclusionProof.model_validate(answer.json()["proof"])
    assert (proof.head.seq, proof.head.hash) == (events[-1].seq, events[-1].hash)
    assert check_proof(proof, signer.public_key()) == []
    assert check_proof(proof, SeedSigner(os.urandom(32)).public_key()) != []


async def test_tenant_cost_counts_the_summaries_the_model_wrote_and_equals_the_sessions_own_cost(gw) -> None:
    _, client, seeder = gw
    model = f"claude-cost-{uuid.uuid4().hex[:8]}"  # this test's rows only, in the module's tenant
    agent = f"agent:{model}"
    written = {"input_tokens": 400, "output_tokens": 30}
    log = await seeder.session([
        created(model=model),
        draft("user_message", f"cmd-{uuid.uuid4()}", text="go"),
        draft("turn_started", turn=1),
        draft("model_turn", actor=agent, text="Looking.", stop_reason="tool_use", tool_call_ids=["tc-c1"],
              usage={"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 50}),
        draft("tool_call", actor=agent, tool_call_id="tc-c1", name="list_files", input={}),
        draft("tool_result", "result:tc-c1", tool_call_id="tc-c1", name="list_files", output="a.txt"),
        # a summary the model wrote: a model call with its usage
        draft("compaction", actor=agent, summary="SUMMARY", covered_from_seq=2, covered_to_seq=3, tokens_before=900,
              tokens_after=200, summary_model=model, usage=written, tokens_before_source="count_tokens"),
        draft("model_turn", actor=agent, text="Done.",
              usage={"input_tokens": 200, "output_tokens": 20, "cache_creation_input_tokens": 70}),
        draft("turn_ended", turn=1),
        draft("user_message", f"cmd-{uuid.uuid4()}", text="again"),
        draft("turn_started", turn=2),
        # a mechanical one: no model call, nothing to count
        draft("compaction", summary="user: go", covered_from_seq=2, covered_to_seq=9, tokens_before=800,
              tokens_after=100),
        draft("model_turn", actor=agent, text="Again.", usage={"input_tokens": 5, "output_tokens": 1}),
        draft("turn_ended", turn=2),
    ])
    expected = {"input_tokens": 705, "output_tokens": 61, "cache_read_input_tokens": 50,
                "cache_creation_input_tokens": 70}
    auditor = bearer(await api_key(seeder.tenant, "cost-auditor", "auditor"))
    since = log[0].ts.isoformat()
    answer = await client.get("/v1/audit/cost", params={"since": since}, headers=auditor)
    assert answer.status_code == 200, answer.text
    rows = [r for r in answer.json()["data"] if r["model"] == model]
    assert len(rows) == 1 and rows[0]["actor"] == OWNER
    assert (rows[0]["calls"], rows[0]["tokens"]) == (4, expected)  # three turns and the summary

    own = (await client.get(f"/v1/sessions/{log[0].session_id}/cost")).json()
    assert (own["model_calls"], own["tokens"]) == (4, expected)
    listed = (await client.get("/v1/sessions", params={"model": model})).json()["data"]  # the list's cost too
    assert [s["cost"] for s in listed] == [{"model_calls": 4, "input_tokens": 825, "output_tokens": 61}]
    assert [(c["tokens_before_source"], c["tokens_after_source"]) for c in own["compactions"]] == [
        ("count_tokens", "estimate"), ("estimate", "estimate")]
    # A model's wall time runs from the turn's start to its reply, through the summary call.
    assert own["model_wall_s"] == round(sum((log[i].ts - log[j].ts).total_seconds()
                                            for i, j in ((3, 2), (7, 5), (12, 10))), 3)


async def test_a_fork_whose_inherited_prefix_retention_dropped_answers_409_prefix_unavailable(gw) -> None:
    _, client, seeder = gw
    name, start, end = await fresh_month()
    parent = factories.sealed([created(), *one_turn(1)], tenant=seeder.tenant,
                              stamps=factories.at([start + timedelta(days=1, minutes=i) for i in range(8)]))
    await seeder.insert(parent, parent)
    link = ForkedPayload(parent_session_id=parent[0].session_id, fork_seq=8, parent_hash=parent[7].hash,
                         config=SessionConfig(), owner=OWNER)
    fork = factories.sealed([draft(link, "cmd-fork"), draft("user_message", "cmd-fork", text="again")],
                            tenant=seeder.tenant, after=parent[7],
                            stamps=factories.LIVE)
    await seeder.insert(fork, fork)
    fork_id = fork[0].session_id
    assert (await client.get(f"/v1/sessions/{fork_id}/transcript")).status_code == 200  # whole, before the drop

    async with owner_connection() as conn, conn.transaction():
        await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", seeder.tenant)
        await conn.execute("INSERT INTO retention_policies (tenant, keep, set_by) VALUES ($1, '1 day', 'admin:test')",
                           seeder.tenant)
    dropped = await apply_retention(RetentionSettings().postgres_maintenance_dsn, None, end + timedelta(days=1))
    assert any(entry["partition_name"] == name for entry in dropped)

    for path in ("transcript", "replay", "export?inherited=true"):
        answer = await client.get(f"/v1/sessions/{fork_id}/{path}")
        assert answer.status_code == 409, (path, answer.text)
        assert answer.json()["code"] == "prefix_unavailable" and "inherits is gone" in answer.json()["detail"]
    own = await client.get(f"/v1/sessions/{fork_id}/export")  # its own log is whole
    assert own.status_code == 200 and [parse_event(line).seq for line in own.text.splitlines()] == [9, 10]


async def test_verify_checks_the_signed_rows_in_postgres_when_the_gateway_has_the_public_key(tmp_path) -> None:
    signer = SeedSigner(os.urandom(32))
    settings = gateway_settings(evidence_public_key=signer.public_key().hex(), evidence_key_fingerprint=signer.key_id)
    async with running_gateway(settings, role="auditor") as (_, client), \
            TenantPool(settings.postgres_dsn, min_size=1, max_size=1) as pool:
        seeder = Seeder(pool, settings.tenant)
        events = await seeder.session([created()] + one_turn(1))
        sid = events[0].session_id
        common = CommonSettings()  # the signer publishes as the admin tool principal
        await witnesses.ensure_topic(common)
        await sign_round(pool, signer, settings.tenant, common, tmp_path / "sink")
        clean = (await client.get(f"/v1/sessions/{sid}/verify")).json()
        assert (clean["ok"], clean["evidence_checked"], clean["witnesses_checked"], clean["signed_checkpoint"]) == (
            True, True, ["postgres"], 1), clean
        last = events[-1].seq
        async with superuser_connection() as conn, guards_off(conn, [partition_of(events[-1]), "event_keys"]):
            await conn.execute(f"DELETE FROM {partition_of(events[-1])} WHERE session_id = $1 AND seq > 3", sid)
            await conn.execute("DELETE FROM event_keys WHERE session_id = $1 AND seq > 3", sid)
        cut = (await client.get(f"/v1/sessions/{sid}/verify")).json()
        evidence = await witnesses.gather_postgres(pool, settings.tenant, signer.public_key())
        label = f"#1 {evidence.genuine[0].statement.id}"
        assert (cut["ok"], cut["first_bad_seq"], cut["reason"]) == (
            False, last, f"rewritten since signed checkpoint {label}: seq {last} it anchored is missing"), cut
        tenant = (await client.get("/v1/audit/verify")).json()
        assert [(s["session_id"], s["ok"], s["witnesses_checked"]) for s in tenant["sessions"]] == [
            (sid, False, ["postgres"])]
    # The gateway without the public key reads the same cut chain as whole: it says it did not check.
    async with running_gateway(gateway_settings(tenant=settings.tenant), role="auditor") as (_, bare):
        unsigned = (await bare.get(f"/v1/sessions/{sid}/verify")).json()
    assert (unsigned["ok"], unsigned["evidence_checked"], unsigned["witnesses_checked"]) == (True, False, [])


def partition_of(event) -> str:
    return f"events_y{event.ts.year:04d}m{event.ts.month:02d}"
