"""Request validation and the small pure decisions of the gateway, without Kafka or Postgres.

The API-level checks run the real app with `FakeSessionStore` in place of Postgres (a
dependency override); the lifespan is not entered, so nothing connects anywhere.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from wakeline.contract.commands import WakeSession
from wakeline.contract.events import SessionConfig
from wakeline_gateway.app import create_app
from wakeline_gateway.auth import Caller
from wakeline_gateway.deps import authenticate, get_audit, get_inbox, get_store
from wakeline_gateway.dispatch import describe
from wakeline_gateway.errors import ApiError
from wakeline_gateway.idempotency import key_id_for, session_id_for
from wakeline_gateway.routes.sessions import decode_cursor, encode_cursor, with_model
from wakeline_gateway.routes.stream import resume_after
from wakeline_gateway.settings import GatewaySettings
from wakeline_gateway.shapes.reads import EventsQuery

NOW = datetime(2025, 1, 1, tzinfo=UTC)
ROW = {"session_id": "s-1", "owner": "user:local", "title": None, "model": "scripted:demo", "status": "idle",
       "last_seq": 3, "created_at": NOW, "updated_at": NOW, "ended_reason": None, "parent_session_id": None,
       "fork_seq": None, "deleted_at": None, "deleted_by": None}


class FakeSessionStore:
    def __init__(self, rows: dict[str, dict]):
        self.rows = rows

    async def session(self, scope, session_id: str):
        return self.rows.get(session_id)


class FakeInbox:
    def __init__(self) -> None:
        self.sent: list = []

    async def submit(self, command) -> None:
        self.sent.append(command)


@pytest.fixture
def api():
    app = create_app(GatewaySettings())
    inbox = FakeInbox()
    app.dependency_overrides[get_store] = lambda: FakeSessionStore({"s-1": ROW, "gone": ROW | {"status": "deleted"}})
    app.dependency_overrides[get_inbox] = lambda: inbox
    app.dependency_overrides[authenticate] = lambda: Caller("default", "local", "user", "0" * 16)
    app.dependency_overrides[get_audit] = lambda: None  # a user's reads are not audit reads: never called
    return TestClient(app), inbox


def test_events_query_accepts_a_lead_up_window() -> None:
    query = EventsQuery(before=10, limit=3, type=["tool_call"])
    assert (query.after, query.before, query.limit, query.type) == (None, 10, 3, ["tool_call"])


@pytest.mark.parametrize("fields, problem", [
    ({"after": 4, "before": 4}, "after (4) must be less than before (4)"),
    ({"limit": 0}, "greater than or equal to 1"), ({"limit": 1001}, "less than or equal to 1000"),
    ({"before": 0}, "greater than or equal to 1"), ({"type": ["bogus"]}, "session_created"),
    ({"sort": "desc"}, "Extra inputs are not permitted"),
])
def test_events_query_refuses_windows_that_make_no_sense(fields, problem) -> None:
    with pytest.raises(ValidationError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        EventsQuery(**fields)


def test_validation_errors_are_json_naming_where_and_what(api) -> None:
    client, _ = api
    answer = client.get("/v1/sessions/s-1/events", params={"limit": 0, "after": "x"})
    body = answer.json()
    assert answer.status_code == 422 and body["detail"].startswith("invalid request: ")
    assert {e["where"] for e in body["errors"]} == {"query.limit", "query.after"}


def test_unknown_and_deleted_sessions_are_404_json(api) -> None:
    client, inbox = api
    unknown, deleted = client.get("/v1/sessions/nope"), client.post("/v1/sessions/gone/wake")
    assert (unknown.status_code, deleted.status_code) == (404, 404)
    assert "'nope'" in unknown.json()["detail"] and inbox.sent == []


def test_a_body_with_a_tenant_is_refused_because_the_tenant_comes_from_the_caller(api) -> None:
    client, inbox = api
    answer = client.post("/v1/sessions", json={"message": "x", "tenant": "someone-else"})
    assert answer.status_code == 422 and "body.tenant" in answer.json()["detail"] and inbox.sent == []


def test_unknown_route_is_a_problem_too(api) -> None:
    client, _ = api
    answer = client.get("/v2/nothing")
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json() == {"type": "urn:wakeline:problem:not_found", "title": "Not Found", "status": 404,
                             "detail": "Not Found", "code": "not_found"}


def test_openapi_documents_the_api(api) -> None:
    client, _ = api
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/sessions", "/v1/sessions/{session_id}/events", "/v1/sessions/{session_id}/stream",
            "/healthz"} <= set(paths)
    assert client.get("/docs").status_code == 200


def test_key_ids_from_an_idempotency_key_are_stable_and_scoped() -> None:
    same = key_id_for("t", "s", "k") == key_id_for("t", "s", "k")
    scoped = len({key_id_for("t", "s", "k"), key_id_for("t2", "s", "k"), key_id_for("t", "s2", "k")})
    assert same and scoped == 3
    assert session_id_for("t", "user:a", "k") == session_id_for("t", "user:a", "k") \
        != session_id_for("t2", "user:a", "k")
    assert session_id_for("t", "user:a", "k") != session_id_for("t", "user:b", "k")


def test_the_gateway_default_model_applies_only_when_the_body_names_none() -> None:
    assert with_model(None, "scripted:demo").model == "scripted:demo"
    assert with_model(SessionConfig(max_turns=3), "scripted:demo").model == "scripted:demo"
    assert with_model(SessionConfig(model="claude-x"), "scripted:demo").model == "claude-x"


def test_cursor_round_trips_and_garbage_is_a_422() -> None:
    assert decode_cursor(encode_cursor(NOW, "s-9")) == (NOW, "s-9")
    with pytest.raises(ApiError) as err:
        decode_cursor("!!!")
    assert err.value.status == 422


def test_last_event_id_wins_over_after_and_must_be_a_seq() -> None:
    assert (resume_after(None, None), resume_after(None, 4), resume_after("7", 4)) == (0, 4, 7)
    with pytest.raises(ApiError):
        resume_after("seven", None)


def test_a_command_without_an_outcome_is_described_as_pending() -> None:
    answer = describe(WakeSession(command_id="c", session_id="s"), None, 15)
    assert (answer.status, answer.seq, answer.outcome) == ("pending", None, None) and "15 s" in answer.note


@pytest.mark.parametrize("path", ["/etc/passwd", "../MEMORY.md", "notes/../../x"])
def test_a_memory_file_outside_the_work_dir_is_a_422_naming_it(api, path) -> None:
    client, inbox = api
    answer = client.post("/v1/sessions", json={"message": "x", "config": {"memory_file": path}})
    assert answer.status_code == 422 and "memory_file" in answer.json()["detail"] and inbox.sent == []


def test_a_memory_file_inside_the_work_dir_reaches_the_session_and_the_openapi_schema(api) -> None:
    client, inbox = api
    answer = client.post("/v1/sessions", json={"message": "x", "wait": False,
                                                "config": {"memory_file": "notes/MEMORY.md"}})
    assert answer.status_code < 300 and inbox.sent[0].config.memory_file == "notes/MEMORY.md"
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert "memory_file" in schemas["SessionConfig"]["properties"]
