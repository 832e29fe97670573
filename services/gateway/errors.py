"""What turns a failure into a problem response (`problem.py`): one handler per kind.

`ApiError` is what routes and dependencies raise. Request validation failures name each
field in `errors`. A record over the limit is 413, Postgres refusing a value is 422,
Kafka or Postgres being unreachable is 503, and anything else is a 500 that names
nothing internal. The body-size cap is in `bodylimit.py`.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import asyncpg
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from wakeline.contract.events import CorruptEvent
from wakeline.contract.limits import RecordTooLarge
from wakeline_gateway.bodylimit import BodyTooLarge
from wakeline_gateway.problem import problem_response

log = logging.getLogger(__name__)
RETRY_LATER = {"Retry-After": "5"}
# Errors that say the database is out of reach, not that the request is wrong.
POSTGRES_DOWN = (asyncpg.PostgresConnectionError, asyncpg.CannotConnectNowError, asyncpg.AdminShutdownError,
                 asyncpg.TooManyConnectionsError, asyncpg.ConnectionDoesNotExistError)


class ApiError(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None,
                 code: str | None = None, **extra: Any):
        super().__init__(detail)
        self.status, self.detail, self.code, self.extra, self.headers = status, detail, code, extra, headers


def validation_problems(errors: list[dict[str, Any]]) -> list[dict[str, str]]:
    problems = []
    for item in errors:
        where = ".".join(str(part) for part in item.get("loc", ())) or "request"
        problem = str(item.get("msg", "invalid")).removeprefix("Value error, ")
        problems.append({"where": where, "problem": problem})
    return problems


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RecordTooLarge, _too_large)
    app.add_exception_handler(BodyTooLarge, _body_too_large)
    app.add_exception_handler(CorruptEvent, _corrupt_event)
    app.add_exception_handler(asyncpg.DataError, _refused_by_postgres)
    for kind in (*POSTGRES_DOWN, OSError, KafkaConnectionError, KafkaTimeoutError):
        app.add_exception_handler(kind, _unavailable)
    app.add_exception_handler(Exception, _unexpected)


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    return problem_response(exc.status, exc.detail, exc.code, exc.headers, **exc.extra)


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = validation_problems(list(exc.errors()))
    summary = "; ".join(f"{p['where']}: {p['problem']}" for p in problems[:5])
    return problem_response(422, f"invalid request: {summary}", errors=problems)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    # Starlette's own: 404 for an unknown path, 405, 400 for a body that is not JSON at all
    # (e.g. not UTF-8) -- which is the same "invalid request" as malformed JSON.
    status = 422 if exc.status_code == 400 else exc.status_code
    headers = exc.headers
    if status == 405:
        headers = {**(headers or {}), "Allow": ", ".join(allowed_methods(request))}
    return problem_response(status, str(exc.detail), headers=headers)


def allowed_methods(request: Request) -> list[str]:
    """Every method some operation serves at this path, read from the OpenAPI document:
    FastAPI makes one route per method, so Starlette's own 405 names only one of them."""
    methods: set[str] = set()
    for template, operations in request.app.openapi()["paths"].items():
        if re.fullmatch(re.sub(r"\{[^}/]+\}", "[^/]+", template), request.url.path):
            methods |= {method.upper() for method in operations}
    return sorted(methods)


async def _too_large(request: Request, exc: RecordTooLarge) -> JSONResponse:
    return problem_response(413, f"{exc}; send less, or split it", "too_large",
                            limit_bytes=exc.limit, size_bytes=exc.size)


async def _body_too_large(request: Request, exc: BodyTooLarge) -> JSONResponse:
    return problem_response(413, str(exc.detail), "too_large", limit_bytes=exc.cap)


async def _corrupt_event(request: Request, exc: CorruptEvent) -> JSONResponse:
    return problem_response(500, f"{exc}; GET .../verify reports the chain", "corrupt_event", seq=exc.seq)


async def _refused_by_postgres(request: Request, exc: asyncpg.DataError) -> JSONResponse:
    # Input validation should have caught it first; say which value class Postgres refused.
    log.warning("postgres refused a value from %s %s: %s", request.method, request.url.path, exc)
    return problem_response(422, f"a value in the request cannot be stored or compared: {type(exc).__name__}")


async def _unavailable(request: Request, exc: Exception) -> JSONResponse:
    log.warning("dependency unavailable for %s %s: %s: %s", request.method, request.url.path,
                type(exc).__name__, exc)
    return problem_response(503, f"a dependency is unavailable ({type(exc).__name__}); retry later",
                            "unavailable", RETRY_LATER)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected failure in %s %s", request.method, request.url.path)
    return problem_response(500, "unexpected failure; it is in the gateway's log", "server_error")
