"""`GET /healthz`: the process is up and Postgres answers."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from wakeline_gateway.deps import StoreDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz(store: StoreDep) -> JSONResponse:
    try:
        await store.ping()
    except Exception as err:  # any failure to reach the database is "not ready"
        return JSONResponse({"ok": False, "postgres": f"{type(err).__name__}: {err}"}, status_code=503)
    return JSONResponse({"ok": True, "postgres": "ok"})
