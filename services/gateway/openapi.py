"""The OpenAPI document, with every error declared as the one problem shape (`problem.py`).

Routes declare which statuses they can answer (`problem.responses`); here each error
status gets `application/problem+json` as its only content (but the HTTP server's own 400,
in plain text, which every operation lists), and FastAPI's default 422
schema (`HTTPValidationError`), which this API never answers, is taken out.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from wakeline_gateway.problem import MEDIA_TYPE

PROBLEM_REF = {"$ref": "#/components/schemas/ProblemDetails"}
FASTAPI_422 = ("HTTPValidationError", "ValidationError")
# Answered by the HTTP server (uvicorn) before any route runs, so not a problem document: a
# request line or header it cannot parse, such as a URL longer than its parser takes.
UNPARSEABLE = {"description": "The request is not parseable HTTP (an over-long URL or header, say); answered by "
                              "the HTTP server itself, in plain text.",
               "content": {"text/plain": {"schema": {"type": "string"}}}}


def problem_openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description,
                             routes=app.routes)
        for path in schema["paths"].values():
            for operation in path.values():
                _errors_as_problems(operation["responses"])
                operation["responses"].setdefault("400", UNPARSEABLE)
        for name in FASTAPI_422:
            schema["components"]["schemas"].pop(name, None)
        app.openapi_schema = schema
    return app.openapi_schema


def _errors_as_problems(responses: dict[str, Any]) -> None:
    for status, response in responses.items():
        if status.isdigit() and int(status) >= 400:
            response["content"] = {MEDIA_TYPE: {"schema": PROBLEM_REF}}
