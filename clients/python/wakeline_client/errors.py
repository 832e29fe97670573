"""What a failed call raises: `WakelineError` and one subclass per kind the caller may branch on.

The gateway answers every error as an RFC 9457 problem with a machine-readable `code`
(`application/problem+json`); `error_for` picks the class from the code first, then the
status, and keeps the whole problem in `.problem` (extension members such as `current_seq`
included) and the `Retry-After` it sent, in seconds, in `.retry_after_s`. A gateway that
cannot be reached at all, after the retries, is `ConnectionFailed`.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from wakeline_client.retry import parse_retry_after

# Members that only restate the status line, left out of the message.
_RESTATED = ("detail", "errors", "type", "title", "status")


class WakelineError(Exception):
    def __init__(self, detail: str, status: int | None = None, code: str | None = None,
                 problem: dict[str, Any] | None = None, retry_after_s: float | None = None):
        self.detail, self.status, self.code, self.problem = detail, status, code, problem or {}
        self.retry_after_s = retry_after_s
        super().__init__(self._message())

    def _message(self) -> str:
        if self.status is None:
            return self.detail
        extra = {k: v for k, v in self.problem.items() if k not in _RESTATED}
        return f"{self.status}: {self.detail}" + (f" {json.dumps(extra)}" if extra else "")


class ConnectionFailed(WakelineError):
    """No answer at all: refused, reset or timed out, on every attempt."""


class Unauthorized(WakelineError):
    """401: no key, or one that is malformed, unknown or revoked."""


class Forbidden(WakelineError):
    """403: the key's role may not do this."""


class NotFound(WakelineError):
    """404: no such session (or tool call) for this caller."""


class UnknownToolCall(NotFound):
    """404 `unknown_tool_call`: the session never asked for this tool call."""


class Conflict(WakelineError):
    """409: the session's state refuses the command (e.g. a stale `expected_seq`)."""


class ToolCallAlreadyAnswered(Conflict):
    """409 `tool_call_already_answered`: a different result was recorded first."""


class NotPending(Conflict):
    """409 `not_pending`: the call is not waiting for a posted result (a built-in tool's, say)."""


class BudgetExhausted(Conflict):
    """409 `budget_exhausted`: the session's budget is spent; send the message with a raised `budget`."""


class TooLarge(WakelineError):
    """413: the body, or the event it would become, is over the record limit."""


class InvalidRequest(WakelineError):
    """422: `errors` in `.problem` names each invalid field."""


class IdempotencyKeyReused(InvalidRequest):
    """422 `idempotency_key_reused`: the key was sent before with a different request."""


class QuotaExceeded(WakelineError):
    """429 `quota_exceeded`: the tenant is over a rate quota and nothing was sent; retried after
    `Retry-After` (`RetryPolicy.max_retries` times) before this is raised. `.retry_after_s` is
    how long the gateway said to wait; `.quota` which quota is full, `.limit` its value."""

    @property
    def quota(self) -> str | None:
        return self.problem.get("quota")

    @property
    def limit(self) -> int | None:
        return self.problem.get("limit")


class Unavailable(WakelineError):
    """503: Kafka or Postgres is unavailable; retried before this is raised."""


class ServerError(WakelineError):
    """Any other 5xx."""


BY_CODE: dict[str, type[WakelineError]] = {
    "unknown_tool_call": UnknownToolCall, "tool_call_already_answered": ToolCallAlreadyAnswered,
    "not_pending": NotPending, "idempotency_key_reused": IdempotencyKeyReused, "quota_exceeded": QuotaExceeded,
    "budget_exhausted": BudgetExhausted,
}
BY_STATUS: dict[int, type[WakelineError]] = {
    401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 413: TooLarge, 422: InvalidRequest,
    429: QuotaExceeded, 503: Unavailable,
}


def error_for(response: httpx.Response) -> WakelineError:
    """The exception for an error response (whose body has been read)."""
    problem = _problem(response)
    detail = str(problem.get("detail", response.reason_phrase or "error"))
    code = problem.get("code")
    kind = BY_CODE.get(str(code)) or BY_STATUS.get(response.status_code)
    if kind is None:
        kind = ServerError if response.status_code >= 500 else WakelineError
    return kind(detail, response.status_code, code if isinstance(code, str) else None, problem,
                parse_retry_after(response.headers.get("Retry-After")))


def _problem(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {"detail": response.text[:500]}
    return body if isinstance(body, dict) else {"detail": json.dumps(body)[:500]}
