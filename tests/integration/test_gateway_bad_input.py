"""Plain bad input is a 4xx problem, never a 500, on the real Postgres: values Postgres
cannot hold or compare (NUL, numbers past bigint, times past the calendar) are refused
by the gateway before a query runs, and the gateway keeps serving afterwards.
"""

from __future__ import annotations

import base64
import json

import pytest

from gateway_harness import Seeder, created, gateway_settings, running_gateway
from wakeline.storage.pg import TenantPool

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]
HUGE = "99999999999999999999"  # past Postgres bigint (and int64)


def cursor(*parts: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).decode().rstrip("=")


@pytest.fixture(scope="module")
async def gw():
    settings = gateway_settings()
    # An admin who owns the seeded session: every route is open to it, so only the input decides.
    async with running_gateway(settings, principal="local", role="admin") as (app, client):
        async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
            seeder = Seeder(pool, settings.tenant)
            sid = (await seeder.session([created()]))[0].session_id
            yield client, sid


# (method, path template, query, headers): each answered 500 or worse before.
BAD = [
    ("GET", "/v1/sessions/{sid}/events", {"after": HUGE}, {}),
    ("GET", "/v1/sessions/{sid}/events", {"before": HUGE}, {}),
    ("GET", "/v1/sessions/%00/events", {}, {}),
    ("GET", "/v1/sessions/%00", {}, {}),
    ("POST", "/v1/sessions/%00/wake", {}, {}),
    ("POST", "/v1/sessions/{sid}/approvals/%00", {}, {}),
    ("GET", "/v1/sessions/{sid}/stream", {"after": HUGE}, {}),
    ("GET", "/v1/sessions/{sid}/stream", {}, {"Last-Event-ID": HUGE}),
    ("GET", "/v1/sessions", {"cursor": cursor("2026-01-01T00:00:00+00:00", "a\x00b")}, {}),
    ("GET", "/v1/audit/events", {"cursor": cursor("2026-01-01T00:00:00+00:00", "s", int(HUGE))}, {}),
    ("GET", "/v1/audit/events", {"cursor": cursor("2026-01-01T00:00:00+00:00", "a\x00", 1)}, {}),
    ("GET", "/v1/audit/events", {"principal": "al\x00ice"}, {}),
    ("GET", "/v1/audit/events", {"actor": "user:a\x00"}, {}),
    ("GET", "/v1/audit/events", {"tool": "ba\x00sh"}, {}),
    ("GET", "/v1/audit/events", {"session_id": "s\x00"}, {}),
    ("GET", "/v1/audit/events", {"since": "9999-12-31T23:59:59-05:00"}, {}),
    ("GET", "/v1/audit/sessions", {"until": "0001-01-01T00:00:00+05:00"}, {}),
    ("GET", "/v1/audit/access-log", {"after": HUGE}, {}),
    ("GET", "/v1/audit/access-log", {"since": "9999-12-31T23:59:59-05:00"}, {}),
    ("GET", "/v1/audit/access-log", {"principal": "\x00"}, {}),
]


@pytest.mark.parametrize("method, path, params, headers", BAD, ids=[f"{m} {p} {q or h}" for m, p, q, h in BAD])
async def test_bad_input_is_a_422_problem_not_a_500(gw, method, path, params, headers) -> None:
    client, sid = gw
    answer = await client.request(method, path.format(sid=sid), params=params, headers=headers)
    body = answer.json()
    assert answer.status_code == 422, body
    assert answer.headers["content-type"] == "application/problem+json"
    assert (body["status"], body["code"], body["type"]) == \
        (422, "invalid_request", "urn:wakeline:problem:invalid_request")


async def test_a_body_that_is_not_utf8_json_is_a_422_problem(gw) -> None:
    client, sid = gw
    answer = await client.post(f"/v1/sessions/{sid}/messages", content=b'{"text": "\xff\xfe"}',
                               headers={"Content-Type": "application/json"})
    assert answer.status_code == 422 and answer.json()["code"] == "invalid_request"


async def test_a_lone_surrogate_in_a_message_is_a_422_problem(gw) -> None:
    client, sid = gw
    answer = await client.post(f"/v1/sessions/{sid}/messages", content=b'{"text": "a\\ud800b"}',
                               headers={"Content-Type": "application/json"})
    assert answer.status_code == 422 and answer.json()["code"] == "invalid_request"


async def test_a_method_a_path_does_not_serve_is_405_naming_every_method_it_does(gw) -> None:
    client, sid = gw
    answer = await client.request("PATCH", f"/v1/sessions/{sid}")
    assert answer.status_code == 405 and answer.json()["code"] == "method_not_allowed"
    assert set(answer.headers["allow"].split(", ")) >= {"GET", "DELETE"}


async def test_after_every_bad_request_the_gateway_still_answers_good_ones(gw) -> None:
    client, sid = gw
    for method, path, params, headers in BAD:
        await client.request(method, path.format(sid=sid), params=params, headers=headers)
    answer = await client.get(f"/v1/sessions/{sid}/events", params={"after": 0})
    assert answer.status_code == 200 and answer.json()["count"] == 1
