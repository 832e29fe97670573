"""When Kafka cannot take a command the caller gets a 503 problem saying so (and when to
retry), within a bound, not a 500, a hung request or the client library's exception;
reads from Postgres go on. Kafka fails here in three ways. Two of them never raise: a
stopped producer never answers its sends, and a paused broker holds the connection and
answers nothing; only the gateway's own submit timeout ends the wait. The third is an
error the broker sends back (a principal not allowed to write the inbox)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

import pytest

from gateway_harness import InboxWatcher, Seeder, created, gateway_settings, running_gateway
from tests.private_broker import private_broker_in_environ
from wakeline.transport.kafka_io import make_producer
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import INBOX
from wakeline_gateway.inbox import Inbox

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

# A hang bound, not a speed target: ten times the submit timeout below, and short of the
# producer's own 30 s request timeout, so a missing bound cannot pass as that one's error.
ANSWER_BOUND_S = 20.0
T = TypeVar("T")


async def test_a_command_kafka_cannot_take_is_a_503_problem_and_reads_go_on() -> None:
    settings = gateway_settings(submit_timeout_s=1.0)
    async with running_gateway(settings) as (app, client):
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
            sid = (await Seeder(pool, settings.tenant).session([created()]))[0].session_id
        # A real producer whose connection is gone: what the gateway holds during a broker outage.
        producer = make_producer(settings)
        await producer.start()
        await producer.stop()
        app.state.inbox = Inbox(producer, settings.partitions)
        answer = await bounded(client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello?"}))
        body = answer.json()
        assert (answer.status_code, body["code"], answer.headers["retry-after"]) == (503, "unavailable", "5")
        assert answer.headers["content-type"] == "application/problem+json" and INBOX in body["detail"]
        assert (await client.get(f"/v1/sessions/{sid}/events")).status_code == 200


async def test_a_command_the_broker_refuses_is_a_503_problem_naming_the_refusal() -> None:
    settings = gateway_settings(submit_timeout_s=10.0)
    async with running_gateway(settings) as (app, client):
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
            sid = (await Seeder(pool, settings.tenant).session([created()]))[0].session_id
        # The archiver's principal may read the log, never write the inbox (kafka_acls.GRANTS).
        refused = make_producer(CommonSettings(kafka_username="archiver"))
        await refused.start()
        try:
            app.state.inbox = Inbox(refused, settings.partitions)
            answer = await bounded(client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello?"}))
        finally:
            await refused.stop()
        body = answer.json()
        assert (answer.status_code, body["code"], answer.headers["retry-after"]) == (503, "unavailable", "5")
        assert "TopicAuthorizationFailedError" in body["detail"] and INBOX in body["detail"], body["detail"]


async def test_a_broker_that_takes_the_connection_and_never_answers_is_a_503_within_the_bound(tmp_path) -> None:
    # A broker of its own: pausing the shared one would stall every consumer of it.
    with private_broker_in_environ(tmp_path / "broker") as broker:
        settings = gateway_settings(submit_timeout_s=2.0)
        async with asyncio.timeout(120), running_gateway(settings) as (_, client):  # shutdown bounded too
            async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
                sid = (await Seeder(pool, settings.tenant).session([created()]))[0].session_id
            messages = f"/v1/sessions/{sid}/messages"
            async with InboxWatcher(settings) as inbox:  # the path works while the broker answers
                sent = await bounded(client.post(messages, params={"wait": "false"}, json={"text": "first"}))
                assert sent.status_code == 202, sent.text
                assert [c.command_id for c in await inbox.commands_for(sid)] == [sent.json()["command_id"]]
            with broker.paused():  # resumed before the gateway stops: its producer flushes on stop
                answer = await bounded(client.post(messages, params={"wait": "false"}, json={"text": "hello?"}))
                body = answer.json()
                assert (answer.status_code, body["code"], answer.headers["retry-after"]) == (503, "unavailable", "5")
                assert answer.headers["content-type"] == "application/problem+json"
                assert "no ack in 2 s" in body["detail"] and INBOX in body["detail"], body["detail"]
                assert (await bounded(client.get(f"/v1/sessions/{sid}/events"))).status_code == 200


async def bounded(request: Awaitable[T]) -> T:
    """`request`'s answer within ANSWER_BOUND_S, else a failure saying it hung (the in-process
    ASGI transport applies no client timeout of its own)."""
    try:
        return await asyncio.wait_for(request, ANSWER_BOUND_S)
    except TimeoutError:
        pytest.fail(f"no answer within {ANSWER_BOUND_S:g} s: the request hung on a Kafka that never answers")
