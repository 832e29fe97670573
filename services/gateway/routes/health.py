"""`GET /healthz`: the process is up and Postgres answers."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from wakeline_gateway.deps import StoreDep
from wakeline_gateway.problem import problem_response, responses

router = APIRouter(tags=["health"])


class HealthPublic(BaseModel):
    ok: bool
    postgres: str


@router.get("/healthz", response_model=HealthPublic, responses=responses(500, 503))
async def healthz(store: StoreDep) -> JSONResponse:
    try:
        await store.ping()
    except Exception as err:  # any failure to reach the database is "not ready"
        return problem_response(503, f"Postgres does not answer: {type(err).__name__}", "unavailable",
                                ok=False, postgres=f"{type(err).__name__}: {err}")
    return JSONResponse({"ok": True, "postgres": "ok"})
