"""Record-size limits at the edge, on the real Kafka and Postgres: a command whose event
would exceed `max_record_bytes` is 413 naming the limit, counted in encoded bytes, and
never reaches `wakeline.inbox` (where it would stall the brain's partition writer).
"""

from __future__ import annotations

import pytest

from gateway_harness import InboxWatcher, Seeder, created, gateway_settings, running_gateway
from wakeline.storage.pg import TenantPool

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]
LIMIT = 1_000_000  # CommonSettings.max_record_bytes, the default every service shares
# The input: 1,000,000 characters, the first 48,100 of them two bytes each -> an
# event of ~1,048,700 bytes, which the brain's producer refused and its writer died of.
MULTIBYTE = "é" * 48_100 + "a" * (1_000_000 - 48_100)


@pytest.fixture(scope="module")
async def gw():
    settings = gateway_settings()
    assert settings.max_record_bytes == LIMIT
    async with running_gateway(settings) as (app, client):
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool, \
                InboxWatcher(settings) as watcher:
            yield client, Seeder(pool, settings.tenant), watcher


def assert_too_large(answer, limit: int = LIMIT) -> None:
    body = answer.json()
    assert answer.status_code == 413, body
    assert answer.headers["content-type"] == "application/problem+json"
    assert (body["code"], body["limit_bytes"]) == ("too_large", limit) and str(limit) in body["detail"]


async def test_a_message_of_a_million_characters_with_multibyte_ones_is_413_and_never_sent(gw) -> None:
    client, seeder, watcher = gw
    sid = (await seeder.session([created()]))[0].session_id
    answer = await client.post(f"/v1/sessions/{sid}/messages", json={"text": MULTIBYTE})
    assert_too_large(answer)
    assert answer.json()["size_bytes"] > LIMIT
    assert await watcher.up_to_now(sid) == []


async def test_a_message_that_fits_in_bytes_goes_to_the_inbox(gw) -> None:
    client, seeder, watcher = gw
    sid = (await seeder.session([created()]))[0].session_id
    text = "é" * 450_000  # 900,000 bytes: under the limit with room for the event around it
    answer = await client.post(f"/v1/sessions/{sid}/messages", json={"text": text}, params={"wait": "false"})
    assert answer.status_code == 202
    [command] = await watcher.commands_for(sid)
    assert command.text == text


@pytest.mark.parametrize("body", [
    {"message": "é" * 300_000, "title": "t", "config": {"system_prompt": "é" * 300_000}},
    {"message": "x" * 1_000_001},
    {"config": {"tools": [f"tool{i}" for i in range(150_000)]}},  # distinct: a name twice is 422
], ids=["message+config", "long-ascii-message", "config-alone"])
async def test_a_create_whose_session_created_event_would_not_fit_is_413(gw, body) -> None:
    client, _, _ = gw
    assert_too_large(await client.post("/v1/sessions", json={**body, "wait": False}))


async def test_a_tool_result_or_a_denial_reason_over_the_limit_is_413_and_never_sent(gw) -> None:
    client, seeder, watcher = gw
    sid = (await seeder.session([created()]))[0].session_id
    assert_too_large(await client.post(f"/v1/sessions/{sid}/tool-results/tc-1", json={"output": MULTIBYTE}))
    assert_too_large(await client.post(f"/v1/sessions/{sid}/denials/tc-1", json={"reason": MULTIBYTE}))
    assert await watcher.up_to_now(sid) == []


async def test_a_body_over_four_times_the_limit_is_refused_unread(gw) -> None:
    client, seeder, _ = gw
    sid = (await seeder.session([created()]))[0].session_id
    huge = b'{"text": "' + b"a" * (4 * LIMIT) + b'"}'
    answer = await client.post(f"/v1/sessions/{sid}/messages", content=huge,
                               headers={"Content-Type": "application/json"})
    assert_too_large(answer, limit=4 * LIMIT)


async def test_a_chunked_body_without_a_length_is_counted_and_cut_off_at_the_cap(gw) -> None:
    client, seeder, _ = gw
    sid = (await seeder.session([created()]))[0].session_id

    async def chunks():
        yield b'{"text": "'
        for _ in range(5):
            yield b"a" * LIMIT
        yield b'"}'

    answer = await client.post(f"/v1/sessions/{sid}/messages", content=chunks(),
                               headers={"Content-Type": "application/json"})
    assert_too_large(answer, limit=4 * LIMIT)


async def test_after_refusing_large_commands_the_gateway_still_serves_small_ones(gw) -> None:
    client, seeder, watcher = gw
    sid = (await seeder.session([created()]))[0].session_id
    assert_too_large(await client.post(f"/v1/sessions/{sid}/messages", json={"text": MULTIBYTE}))
    answer = await client.post(f"/v1/sessions/{sid}/messages", json={"text": "small"}, params={"wait": "false"})
    assert answer.status_code == 202 and [c.text for c in await watcher.commands_for(sid)] == ["small"]
