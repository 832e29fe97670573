"""The gateway's error model and its pure decisions: codes to statuses, idempotency digests,
the OpenAPI document. No Kafka or Postgres: the app runs with in-memory doubles and its
lifespan is never entered (the real stack is exercised in tests/integration).
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from wakeline.contract.commands import PostMessage, WakeSession
from wakeline.contract.events import REJECTION_CODES, InputRejectedPayload
from wakeline_gateway.app import create_app
from wakeline_gateway.idempotency import key_id_for, key_id_of, keyed
from wakeline_gateway.problem import ERROR_CODES, MEDIA_TYPE
from wakeline_gateway.rejections import REJECTION_STATUS, rejection_code, rejection_status
from wakeline_gateway.settings import GatewaySettings


def test_every_rejection_code_has_its_own_status() -> None:
    assert set(REJECTION_STATUS) == set(REJECTION_CODES) and set(REJECTION_CODES) <= set(ERROR_CODES)
    assert {code: rejection_status(code) for code in ("conflict", "deleted", "wrong_tenant", "too_large",
                                                      "malformed", "internal_error")} == {
        "conflict": 409, "deleted": 404, "wrong_tenant": 404, "too_large": 413, "malformed": 422,
        "internal_error": 409}


def test_a_code_wins_over_the_words_of_the_reason() -> None:
    payload = InputRejectedPayload(command_id="c", reason="conflict? no: it is deleted", code="deleted")
    assert rejection_code(payload) == "deleted"


@pytest.mark.parametrize("reason, code", [
    ("conflict: expected_seq 1 but the session is at seq 2", "conflict"), ("session is deleted", "deleted"),
    ("session belongs to another tenant", "wrong_tenant"), ("session has already ended", "already_ended"),
    ("tool call tc-1 is not awaiting approval", "not_awaiting_approval"),
    ("no person holds the hands, or the tool call is not pending", "not_pending"), ("anything else", "malformed"),
])
def test_events_recorded_before_codes_are_read_from_their_reason(reason, code) -> None:
    assert rejection_code(InputRejectedPayload(command_id="c", reason=reason)) == code


def _message(text: str, actor: str = "user:a") -> PostMessage:
    return PostMessage(command_id="fresh", session_id="s", tenant="t", actor=actor, text=text)


def test_a_keyed_command_id_is_the_key_id_and_a_digest_of_the_request() -> None:
    first, retry = keyed(_message("hi"), "k"), keyed(_message("hi"), "k")
    other_text, other_actor = keyed(_message("ho"), "k"), keyed(_message("hi", "service:s"), "k")
    other_route = keyed(WakeSession(command_id="x", session_id="s", tenant="t", actor="user:a"), "k")
    assert first.command_id == retry.command_id and key_id_of(first.command_id) == key_id_for("t", "s", "k")
    assert len({first.command_id, other_text.command_id, other_actor.command_id, other_route.command_id}) == 4
    assert {key_id_of(c.command_id) for c in (other_text, other_actor, other_route)} == {key_id_for("t", "s", "k")}


@pytest.fixture(scope="module")
def openapi() -> dict:
    return TestClient(create_app(GatewaySettings())).get("/openapi.json").json()


def test_every_error_status_of_every_operation_is_a_problem(openapi) -> None:
    """All but the HTTP server's own 400 for a request it cannot parse (an over-long URL): it
    answers before any route, in plain text, and every operation documents it so."""
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            errors = {s: r for s, r in operation["responses"].items() if int(s) >= 400}
            assert {"400", "500", "503"} <= set(errors), (method, path)
            for status, response in errors.items():
                if status == "400":
                    assert response["content"] == {"text/plain": {"schema": {"type": "string"}}}, (method, path)
                    continue
                assert response["content"] == {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/ProblemDetails"}}}
    assert "HTTPValidationError" not in openapi["components"]["schemas"]


def test_every_v1_operation_declares_auth_and_validation_errors(openapi) -> None:
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            if path.startswith("/v1/"):
                assert {"401", "403", "422"} <= set(operation["responses"]), (method, path)
            if "{session_id}" in path:
                assert "404" in operation["responses"], (method, path)
            if method in ("post", "put"):
                assert "413" in operation["responses"], (method, path)


def test_every_operation_that_sends_a_command_declares_429_with_retry_after(openapi) -> None:
    """A command (it takes an Idempotency-Key) may meet the tenant's rate quotas; nothing else does."""
    commands = 0
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            keyed = any(p["in"] == "header" and p["name"] == "Idempotency-Key" for p in operation.get("parameters", ()))
            assert ("429" in operation["responses"]) == keyed, (method, path)
            if keyed:
                commands += 1
                assert operation["responses"]["429"]["headers"]["Retry-After"]["schema"] == {
                    "type": "integer", "minimum": 1}, (method, path)
    assert commands >= 10


def test_the_problem_schema_names_its_codes(openapi) -> None:
    schema = openapi["components"]["schemas"]["ProblemDetails"]
    assert {"type", "title", "status", "detail", "code"} <= set(schema["required"])
    assert set(schema["properties"]["code"]["enum"]) == set(ERROR_CODES)
