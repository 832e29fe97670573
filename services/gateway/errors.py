"""Every error the API answers is JSON with a `detail` naming the problem.

`ApiError` is what routes and dependencies raise; request validation failures get one
clear shape: `{"detail": "...", "errors": [{"where": "query.limit", "problem": "..."}]}`.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from wakeline_gateway.store import CorruptEvent


class ApiError(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None, **extra: Any):
        super().__init__(detail)
        self.status, self.detail, self.extra, self.headers = status, detail, extra, headers


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
    app.add_exception_handler(CorruptEvent, _corrupt_event)


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    return JSONResponse({"detail": exc.detail, **exc.extra}, status_code=exc.status, headers=exc.headers)


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = validation_problems(list(exc.errors()))
    summary = "; ".join(f"{p['where']}: {p['problem']}" for p in problems[:5])
    return JSONResponse({"detail": f"invalid request: {summary}", "errors": problems}, status_code=422)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)


async def _corrupt_event(request: Request, exc: CorruptEvent) -> JSONResponse:
    return JSONResponse({"detail": f"{exc}; GET .../verify reports the chain", "seq": exc.seq},
                        status_code=500)
