"""The gateway's commands: each lands on the real wakeline.inbox keyed and partitioned by
session id, and the answer comes from the event it causes, read from the real Postgres.

No brain of ours runs. Tests that check records on Kafka never record an answer; tests
that play the brain (`answer_command`, or an insert while the request waits) keep their
commands on a `FakeInbox`, so a live brain elsewhere on the broker cannot sequence the
same session behind their back (see the harness).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from gateway_harness import (
    FakeInbox, InboxWatcher, Seeder, answer_command, api_key, bearer, created, draft, gateway_settings,
    running_gateway,
)
from wakeline.contract.commands import (
    ApproveToolCall, CancelSession, CreateSession, DeleteSession, DenyToolCall, PostMessage, WakeSession,
)
from wakeline.storage.pg import TenantPool
from wakeline.contract.topics import INBOX, partition_for
from wakeline_gateway.deps import get_inbox
from wakeline.contract.events import REJECTION_CODES
from wakeline_gateway.idempotency import key_id_for, key_id_of, session_id_for

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


@pytest.fixture(scope="module")
async def gw():
    settings = gateway_settings()
    async with running_gateway(settings) as (app, client):
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
                InboxWatcher(settings) as watcher:
            yield settings, client, Seeder(pool, settings.tenant), watcher


@pytest.fixture(scope="module")
async def played():
    """The gateway with the test as its brain: commands go to a FakeInbox, answers to Postgres."""
    # The test's answers go straight to Postgres, never past the events feed: recheck often.
    settings = gateway_settings(wait_timeout_s=3.0, outcome_recheck_s=0.05)
    inbox = FakeInbox()
    async with running_gateway(settings) as (app, client):
        app.dependency_overrides[get_inbox] = lambda: inbox
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
            yield settings, client, Seeder(pool, settings.tenant), inbox


async def test_create_puts_the_command_on_its_sessions_partition(gw) -> None:
    settings, client, _, watcher = gw
    answer = await client.post("/v1/sessions", json={"message": "list the files", "title": "t", "wait": False})
    body = answer.json()
    [record] = await watcher.records_for(body["session_id"])
    command = CreateSession.model_validate_json(record.value)
    assert answer.status_code == 202 and body["status"] == "pending"
    assert (record.topic, record.key, record.partition) == (
        INBOX, body["session_id"].encode(), partition_for(body["session_id"], settings.partitions))
    assert (command.command_id, command.tenant, command.actor) == (body["command_id"], settings.tenant,
                                                                   "user:local")
    assert (command.config.model, command.message, command.title) == ("scripted:demo", "list the files", "t")


async def test_create_keeps_the_model_the_body_names(gw) -> None:
    _, client, _, watcher = gw
    body = (await client.post("/v1/sessions", json={"config": {"model": "scripted:other", "max_turns": 3},
                                                    "wait": False})).json()
    [command] = await watcher.commands_for(body["session_id"])
    assert (command.config.model, command.config.max_turns) == ("scripted:other", 3)


async def test_create_without_an_answer_in_time_is_202_with_the_ids_and_a_note(played) -> None:
    _, client, _, inbox = played
    answer = await client.post("/v1/sessions", json={"message": "anyone?"})
    body = answer.json()
    assert answer.status_code == 202 and body["status"] == "pending" and "no outcome was recorded" in body["note"]
    assert [c.command_id for c in inbox.commands_for(body["session_id"])] == [body["command_id"]]


async def test_create_answers_201_with_the_session_once_the_brain_records_it(played) -> None:
    settings, client, seeder, inbox = played
    key = str(uuid.uuid4())
    session_id = session_id_for(settings.tenant, "user:local", key)
    respond = lambda cmd: [created(title=cmd.title)]  # noqa: E731
    answer, _ = await asyncio.gather(
        client.post("/v1/sessions", json={"title": "made"}, headers={"Idempotency-Key": key}),
        answer_command(inbox, seeder, session_id, [], respond))
    assert answer.status_code == 201
    assert answer.json()["session"]["session_id"] == session_id and answer.json()["session"]["title"] == "made"


async def test_idempotency_key_makes_a_retried_message_the_same_command(gw) -> None:
    settings, client, seeder, watcher = gw
    sid = (await seeder.session([created()]))[0].session_id
    post = lambda: client.post(f"/v1/sessions/{sid}/messages", params={"wait": "false"},  # noqa: E731
                               json={"text": "hi"}, headers={"Idempotency-Key": "k-1"})
    first, second = (await post()).json(), (await post()).json()
    commands = await watcher.commands_for(sid, count=2)
    assert first["command_id"] == second["command_id"]
    assert key_id_of(first["command_id"]) == key_id_for(settings.tenant, sid, "k-1")
    assert [c.command_id for c in commands] == [first["command_id"]] * 2
    assert all(isinstance(c, PostMessage) and c.text == "hi" for c in commands)


async def test_message_answers_202_with_seq_and_a_retry_returns_the_same_outcome(played) -> None:
    _, client, seeder, inbox = played
    history = await seeder.session([created()])
    sid = history[0].session_id
    post = lambda: client.post(f"/v1/sessions/{sid}/messages", json={"text": "go"},  # noqa: E731
                               headers={"Idempotency-Key": "k-2"})
    respond = lambda cmd: [draft("user_message", text=cmd.text)]  # noqa: E731
    answer, _ = await asyncio.gather(post(), answer_command(inbox, seeder, sid, history, respond))
    retry = await post()
    assert answer.status_code == retry.status_code == 202
    assert answer.json() | {"note": None} == retry.json() | {"note": None}
    assert (answer.json()["status"], answer.json()["seq"], answer.json()["queued"]) == ("done", 2, False)
    assert len(inbox.commands_for(sid)) == 1  # the retry found the outcome and sent nothing


async def test_message_during_a_turn_answers_that_it_was_queued(played) -> None:
    _, client, seeder, inbox = played
    history = await seeder.session([created(), draft("user_message", "c0", text="first"),
                                    draft("turn_started", turn=1)])
    sid = history[0].session_id
    respond = lambda cmd: [draft("message_queued", command_id=cmd.command_id, text=cmd.text)]  # noqa: E731
    answer, _ = await asyncio.gather(client.post(f"/v1/sessions/{sid}/messages", json={"text": "also"}),
                                     answer_command(inbox, seeder, sid, history, respond))
    assert (answer.status_code, answer.json()["outcome"], answer.json()["queued"]) == (202, "message_queued", True)


async def test_the_same_key_with_another_body_or_route_is_422_and_sends_nothing(played) -> None:
    _, client, seeder, inbox = played
    history = await seeder.session([created()])
    sid = history[0].session_id
    key = {"Idempotency-Key": f"k-{uuid.uuid4()}"}
    respond = lambda cmd: [draft("user_message", text=cmd.text)]  # noqa: E731
    first, _ = await asyncio.gather(client.post(f"/v1/sessions/{sid}/messages", json={"text": "go"}, headers=key),
                                    answer_command(inbox, seeder, sid, history, respond))
    other_body = await client.post(f"/v1/sessions/{sid}/messages", json={"text": "stop"}, headers=key)
    other_route = await client.post(f"/v1/sessions/{sid}/cancel", headers=key)
    retry = await client.post(f"/v1/sessions/{sid}/messages", json={"text": "go"}, headers=key)
    for answer in (other_body, other_route):
        body = answer.json()
        assert (answer.status_code, body["code"]) == (422, "idempotency_key_reused"), body
        assert (body["command_id"], body["seq"]) == (first.json()["command_id"], 2)
    assert (retry.status_code, retry.json()["seq"], retry.json()["command_id"]) == (202, 2, first.json()["command_id"])
    assert len(inbox.commands_for(sid)) == 1


async def test_stale_expected_seq_answers_409_with_both_seqs(played) -> None:
    _, client, seeder, inbox = played
    history = await seeder.session([created(), draft("user_message", "c0", text="first")])
    sid = history[0].session_id
    respond = lambda cmd: [draft("input_rejected", command_id=cmd.command_id, expected_seq=1,  # noqa: E731
                                 reason="expected_seq 1 but the session is at seq 2", code="conflict")]
    answer, _ = await asyncio.gather(
        client.post(f"/v1/sessions/{sid}/messages", json={"text": "me too", "expected_seq": 1},
                    headers={"Idempotency-Key": "k-409"}),
        answer_command(inbox, seeder, sid, history, respond))
    body = answer.json()
    [command] = inbox.commands_for(sid)
    assert (answer.status_code, body["code"], body["status"]) == (409, "conflict", 409)
    assert (body["expected_seq"], body["current_seq"], body["command_id"]) == (1, 3, command.command_id)


# The status each rejection code answers, stated here apart from the gateway's own table.
STATUS_OF_CODE = {"conflict": 409, "wrong_tenant": 404, "deleted": 404, "unknown_session": 404,
                  "already_exists": 409, "already_ended": 409, "not_awaiting_approval": 409, "not_pending": 409,
                  "internal_error": 409, "too_large": 413, "malformed": 422, "budget_exhausted": 409,
                  "quota_exceeded": 429}


def test_every_rejection_code_is_covered_here() -> None:
    assert set(STATUS_OF_CODE) == set(REJECTION_CODES)


@pytest.mark.parametrize("code", REJECTION_CODES)
async def test_a_rejection_answers_the_status_of_its_code_and_carries_the_code(played, code) -> None:
    _, client, seeder, inbox = played
    history = await seeder.session([created()])
    sid = history[0].session_id
    respond = lambda cmd: [draft("input_rejected", command_id=cmd.command_id,  # noqa: E731
                                 reason="words that do not decide the status", code=code)]
    answer, _ = await asyncio.gather(client.post(f"/v1/sessions/{sid}/approvals/tc-9"),
                                     answer_command(inbox, seeder, sid, history, respond))
    body = answer.json()
    assert (answer.status_code, body["status"], body["code"]) == (STATUS_OF_CODE[code], STATUS_OF_CODE[code], code)
    assert answer.headers["content-type"] == "application/problem+json" and body["seq"] == 2


@pytest.mark.parametrize("reason, status", [("tool call tc-9 is not awaiting approval", 409),
                                            ("session is deleted", 404), ("something else", 422)])
async def test_a_rejection_recorded_before_codes_maps_by_its_reason(played, reason, status) -> None:
    _, client, seeder, inbox = played
    history = await seeder.session([created()])
    sid = history[0].session_id
    respond = lambda cmd: [draft("input_rejected", command_id=cmd.command_id, reason=reason)]  # noqa: E731
    answer, _ = await asyncio.gather(client.post(f"/v1/sessions/{sid}/approvals/tc-9"),
                                     answer_command(inbox, seeder, sid, history, respond))
    assert answer.status_code == status and reason in answer.json()["detail"]


async def test_wake_cancel_approve_deny_send_their_commands(gw) -> None:
    _, client, seeder, watcher = gw
    sid = (await seeder.session([created()]))[0].session_id
    base, quick = f"/v1/sessions/{sid}", {"wait": "false"}
    answers = [await client.post(f"{base}/wake", params=quick), await client.post(f"{base}/cancel", params=quick),
               await client.post(f"{base}/approvals/tc-1", params=quick),
               await client.post(f"{base}/denials/tc-2", params=quick, json={"reason": "too risky"})]
    commands = await watcher.commands_for(sid, count=4)
    assert [a.status_code for a in answers] == [202] * 4
    assert [type(c) for c in commands] == [WakeSession, CancelSession, ApproveToolCall, DenyToolCall]
    assert (commands[2].tool_call_id, commands[3].tool_call_id, commands[3].reason) == ("tc-1", "tc-2", "too risky")
    assert [c.command_id for c in commands] == [a.json()["command_id"] for a in answers]


async def test_approval_answers_200_with_the_recorded_outcome(played) -> None:
    _, client, seeder, inbox = played
    history = await seeder.session([created()])
    sid = history[0].session_id
    respond = lambda cmd: [draft("approval_granted", tool_call_id=cmd.tool_call_id)]  # noqa: E731
    answer, _ = await asyncio.gather(client.post(f"/v1/sessions/{sid}/approvals/tc-7"),
                                     answer_command(inbox, seeder, sid, history, respond))
    assert (answer.status_code, answer.json()["outcome"], answer.json()["seq"]) == (200, "approval_granted", 2)


async def test_delete_says_rows_stay_and_the_session_is_gone_from_reads(played) -> None:
    _, client, seeder, inbox = played
    history = await seeder.session([created()])
    sid = history[0].session_id
    respond = lambda cmd: [draft("deleted", by=cmd.actor, actor=cmd.actor)]  # noqa: E731
    answer, _ = await asyncio.gather(client.delete(f"/v1/sessions/{sid}"),
                                     answer_command(inbox, seeder, sid, history, respond))
    [command] = inbox.commands_for(sid)
    assert isinstance(command, DeleteSession)
    assert answer.status_code == 200 and "refuses DELETE by trigger" in answer.json()["note"]
    assert (await client.get(f"/v1/sessions/{sid}")).status_code == 404


async def test_commands_to_an_unknown_session_are_404_and_send_nothing(gw) -> None:
    _, client, _, watcher = gw
    sid = str(uuid.uuid4())
    answers = [await client.post(f"/v1/sessions/{sid}/messages", json={"text": "x"}),
               await client.post(f"/v1/sessions/{sid}/wake"), await client.delete(f"/v1/sessions/{sid}")]
    assert [a.status_code for a in answers] == [404] * 3
    assert all(sid in a.json()["detail"] for a in answers)
    assert await watcher.up_to_now(sid) == []


@pytest.mark.parametrize("body, where", [({"text": ""}, "body.text"), ({}, "body.text"),
                                         ({"text": "x", "expected_seq": -1}, "body.expected_seq"),
                                         ({"text": "x", "tenant": "other"}, "body.tenant")])
async def test_bad_message_bodies_answer_422_naming_the_field(gw, body, where) -> None:
    _, client, seeder, _ = gw
    sid = (await seeder.session([created()]))[0].session_id
    answer = await client.post(f"/v1/sessions/{sid}/messages", json=body)
    assert answer.status_code == 422 and where in answer.json()["detail"]


async def test_only_the_owner_may_continue_a_session(gw) -> None:
    settings, client, seeder, watcher = gw
    sid = (await seeder.session([draft("session_created", "c", config={}, owner="user:someone-else")]))[0].session_id
    answer = await client.post(f"/v1/sessions/{sid}/messages", json={"text": "mine now"})
    # A user cannot see another user's session at all: 404, the same as one that does not exist.
    assert answer.status_code == 404 and "not found" in answer.json()["detail"]
    auditor = bearer(await api_key(settings.tenant, "audrey", "auditor"))
    readable = await client.get(f"/v1/sessions/{sid}", headers=auditor)
    refused = await client.post(f"/v1/sessions/{sid}/messages", json={"text": "x"}, headers=auditor)
    assert readable.status_code == 200 and refused.status_code == 403
    assert await watcher.up_to_now(sid) == []
