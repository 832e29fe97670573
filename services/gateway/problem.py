"""The one shape of every error the API answers: RFC 9457 problem details plus a `code`.

`type` is `urn:wakeline:problem:<code>`, `title` the status's phrase, `detail` says what
went wrong in words, `code` says it for programs. Extension members (`command_id`,
`expected_seq`, `errors`, `limit_bytes`, ...) appear only where they mean something.
Also here: the OpenAPI `responses` entries that declare the shape per status.
What raises errors and turns exceptions into problems lives in `errors.py`.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, Literal

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from wakeline.contract.events import REJECTION_CODES

MEDIA_TYPE = "application/problem+json"
# The gateway's own codes; the brain's rejection codes (wakeline.events) pass through as they are.
GATEWAY_CODES = ("unauthorized", "forbidden", "not_found", "method_not_allowed", "invalid_request",
                 "idempotency_key_reused", "too_large", "not_implemented", "unavailable",
                 "corrupt_event", "server_error",
                 # forks (routes/forks.py): a seq past the log, inside a tool call, a prefix gone
                 "unknown_seq", "fork_inside_tool_call", "prefix_unavailable",
                 # tool results (routes/tool_calls.py): another answer is recorded, the call was never made
                 "tool_call_already_answered", "unknown_tool_call",
                 # the tenant over a rate quota (quotas/gate.py): 429 with Retry-After
                 "quota_exceeded",
                 # a tenant's admin setting a quota above the operator's ceiling (routes/quotas.py)
                 "above_ceiling",
                 # creating a session with a dollar cap on a model no price is known for (routes/sessions.py)
                 "unpriced_model")
ERROR_CODES: tuple[str, ...] = tuple(dict.fromkeys(GATEWAY_CODES + REJECTION_CODES))
ErrorCode = Literal[ERROR_CODES]  # type: ignore[valid-type]
# The code an error gets when whoever raised it named none.
CODE_FOR_STATUS = {400: "invalid_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                   405: "method_not_allowed", 409: "conflict", 413: "too_large", 422: "invalid_request",
                   429: "quota_exceeded", 501: "not_implemented", 503: "unavailable"}


class FieldProblem(BaseModel):
    where: str = Field(description="e.g. `query.limit`, `body.text`, `path.session_id`.")
    problem: str


class ProblemDetails(BaseModel):
    """An error (RFC 9457). Programs branch on `code`; people read `detail`."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="`urn:wakeline:problem:<code>`.")
    title: str = Field(description="The HTTP status phrase.")
    status: int = Field(ge=400, le=599)
    detail: str
    code: ErrorCode = Field(description="Machine-readable; the brain's rejection codes pass through unchanged.")
    errors: list[FieldProblem] | None = Field(default=None, description="Each invalid field (422).")
    session_id: str | None = None
    command_id: str | None = Field(default=None, description="The command the error is about.")
    seq: int | None = Field(default=None, description="The seq of the event that recorded a rejection.")
    expected_seq: int | None = Field(default=None, description="409 conflict: the seq the command expected.")
    current_seq: int | None = Field(default=None, description="409 conflict: the session's seq now.")
    limit_bytes: int | None = Field(default=None, description="413: the limit that was exceeded.")
    size_bytes: int | None = Field(default=None, description="413: the size that exceeded it, when known.")
    quota: str | None = Field(default=None, description="429: the quota that is full (`commands_per_second`, "
                                                        "`sessions_per_minute`).")
    limit: int | None = Field(default=None, description="429: that quota's value for the tenant.")


def code_for(status: int) -> str:
    return CODE_FOR_STATUS.get(status, "server_error" if status >= 500 else "invalid_request")


def problem_body(status: int, detail: str, code: str | None = None, **extra: Any) -> dict[str, Any]:
    code = code or code_for(status)
    return {"type": f"urn:wakeline:problem:{code}", "title": HTTPStatus(status).phrase, "status": status,
            "detail": detail, "code": code, **{k: v for k, v in extra.items() if v is not None}}


def problem_response(status: int, detail: str, code: str | None = None,
                     headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse(problem_body(status, detail, code, **extra), status_code=status,
                        headers=headers, media_type=MEDIA_TYPE)


WHEN = {
    401: "No API key, or one that is malformed, unknown or revoked.",
    403: "The key's role may not do this, or the session is someone else's to write.",
    404: "No such session for this caller (unknown, deleted, another user's, or its command was "
         "refused because the session is gone).",
    409: "The brain refused the command in the session's current state (e.g. a stale expected_seq: "
         "`conflict`; or `internal_error`: the session's input is parked).",
    413: "The request body, or the event the command would become, is over the record limit "
         "(`limit_bytes`); sizes are counted in encoded bytes.",
    422: "The request is not valid (`errors` names each field), or an Idempotency-Key was reused "
         "for a different request (`idempotency_key_reused`).",
    429: "The tenant is over a rate quota (`quota_exceeded`, naming the `quota` and its `limit`); nothing was "
         "sent. Retry after the `Retry-After` header's seconds.",
    500: "An unexpected failure, or a stored event that no longer decodes (`corrupt_event`).",
    501: "This deployment is built without the feature.",
    503: "Kafka or Postgres is unavailable; retry later.",
}


# Headers a status always carries, declared with it.
HEADERS = {429: {"Retry-After": {"description": "Whole seconds to wait before sending it again (at least 1).",
                                 "schema": {"type": "integer", "minimum": 1}}}}


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries declaring the problem shape (and headers) for each status."""
    return {status: {"model": ProblemDetails, "description": WHEN[status]}
            | ({"headers": HEADERS[status]} if status in HEADERS else {}) for status in statuses}
