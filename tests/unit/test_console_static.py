"""The console's files as the gateway serves them: a strict CSP on every one, nothing
inline, and no code path that turns text into markup or code."""

from __future__ import annotations

import re
from importlib import resources
from typing import get_args

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from wakeline.log.status import Status
from wakeline_gateway.errors import install_error_handlers
from wakeline_gateway.routes import console
from wakeline_gateway.shapes.sessions import ListedStatus

FILES = sorted(p.name for p in resources.files("wakeline_gateway").joinpath("console").iterdir())


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(console.router)
    return TestClient(app)


def test_every_console_file_is_served_with_the_strict_policy(client) -> None:
    assert {"index.html", "app.js", "api.js", "render.js", "console.css"} <= set(FILES)
    for name in FILES:
        response = client.get("/console/" if name == "index.html" else f"/console/{name}")
        assert response.status_code == 200, name
        csp = response.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "connect-src 'self'" in csp and "object-src 'none'" in csp
        assert "frame-ancestors 'none'" in csp and "unsafe" not in csp
        assert response.headers["x-content-type-options"] == "nosniff"


def test_the_bare_path_redirects_and_nothing_else_is_served(client) -> None:
    assert client.get("/console", follow_redirects=False).headers["location"] == "/console/"
    assert client.get("/console/missing.js").status_code == 404
    for name in ("..%2fapp.py", "app.py", "x.html", "APP.JS"):
        assert client.get(f"/console/{name}").status_code in (404, 422), name


def test_the_page_has_no_inline_code_and_the_scripts_never_build_markup_from_text() -> None:
    folder = resources.files("wakeline_gateway").joinpath("console")
    page = folder.joinpath("index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)", page) and not re.search(r"\son[a-z]+=", page)
    assert not re.search(r"\bstyle=", page)  # style-src 'self' would refuse it anyway
    for name in FILES:
        if name.endswith(".js"):
            code = folder.joinpath(name).read_text()
            for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                         "new Function", "EventSource", "localStorage"):
                assert sink not in code, (name, sink)


def test_the_status_filter_offers_exactly_the_statuses_a_listed_session_can_have() -> None:
    """Derived from `wakeline.log.status.Status` (every status but `deleted`, which is never
    listed) and the list API's own `ListedStatus`, so a renamed status cannot leave the page
    offering one the server refuses."""
    page = resources.files("wakeline_gateway").joinpath("console").joinpath("index.html").read_text()
    select = re.search(r'<select id="f-status">(.*?)</select>', page, re.S)
    assert select is not None
    offered = re.findall(r"<option(?: value=\"\")?>([^<]*)</option>", select.group(1))
    assert offered[0] == "any" and '<option value="">any</option>' in select.group(1)
    listed = set(get_args(Status)) - {"deleted"}
    assert set(offered[1:]) == listed == set(get_args(ListedStatus)) and len(offered[1:]) == len(listed)
