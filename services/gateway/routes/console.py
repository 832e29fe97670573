"""The web console: static files under `/console`, served with a strict CSP.

Nothing here reads a session: the page is plain ES modules (services/gateway/console/)
that call the same `/v1` API with the key the person typed in. The policy allows only
this origin's scripts, styles and fetches, so even a console bug that put tool output
into markup could not run it or send it anywhere.
"""

from __future__ import annotations

from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import RedirectResponse, Response

from wakeline_gateway.errors import ApiError

router = APIRouter(tags=["console"], include_in_schema=False)

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "X-Frame-Options": "DENY", "Cache-Control": "no-cache"}
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
AssetName = Annotated[str, Path(pattern=r"^[a-z0-9_-]{1,40}\.(js|css|svg)$")]


def asset(name: str) -> Response:
    suffix = name[name.rfind("."):]
    path = resources.files("wakeline_gateway").joinpath("console", name)
    if not path.is_file():
        raise ApiError(404, f"no console file {name!r}")
    return Response(path.read_bytes(), media_type=TYPES[suffix], headers=HEADERS)


@router.get("/console")
async def console_root() -> RedirectResponse:
    return RedirectResponse("/console/", status_code=308)


@router.get("/console/")
async def console_page() -> Response:
    return asset("index.html")


@router.get("/console/{name}")
async def console_asset(name: AssetName) -> Response:
    return asset(name)
