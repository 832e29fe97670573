"""When Kafka cannot take a command the caller gets a 503 problem saying so (and when to
retry), within a bound, not a 500, a hung request or the client library's exception;
reads from Postgres go on."""

from __future__ import annotations

import pytest

from gateway_harness import Seeder, created, gateway_settings, running_gateway
from wakeline.kafka_io import make_producer
from wakeline.pg import TenantPool
from wakeline.topics import INBOX
from wakeline_gateway.inbox import Inbox

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


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
        answer = await client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello?"})
        body = answer.json()
        assert (answer.status_code, body["code"], answer.headers["retry-after"]) == (503, "unavailable", "5")
        assert answer.headers["content-type"] == "application/problem+json" and INBOX in body["detail"]
        assert (await client.get(f"/v1/sessions/{sid}/events")).status_code == 200
