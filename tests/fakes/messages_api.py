"""A scriptable local server that speaks the Anthropic Messages API wire format.

Tests drive the real `anthropic` SDK against it, so the external model is never reached:

    with FakeMessagesAPI() as api:
        api.enqueue(error(429, "rate_limit_error"), text_message("hi"))
        model = ClaudeModel("claude-test", "test-key", base_url=api.base_url)
        ...
        assert len(api.requests) == 2

Each test enqueues canned responses; each POST /v1/messages pops the next one and the server
records what it received (headers and JSON body). The server checks what the real API requires
(an API key in `x-api-key` or `Authorization: Bearer`, an `anthropic-version` header, and
`model`, `max_tokens`, `messages` in the body) and answers like the real API when something
is missing, so a client that forgets them fails the test. An exhausted queue answers 500 with
`x-should-retry: false`, so a test that scripted too few responses fails fast instead of
hanging in the SDK's retry loop.

The server is uvicorn on 127.0.0.1 with a random free port, in a background thread.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

_ids = itertools.count(1)


@dataclass(frozen=True)
class Canned:
    """One scripted HTTP answer."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Received:
    """One request the server got."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any


def _next_id(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):06d}"


# --- response builders, shaped like the real API --------------------------------------------

def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use_block(name: str, input: dict[str, Any], id: str | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": id or _next_id("toolu"), "name": name, "input": input}


def thinking_block(thinking: str, signature: str = "sig-fake") -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def message(content: list[dict[str, Any]], stop_reason: str = "end_turn", *, input_tokens: int = 10,
            output_tokens: int = 5, model: str = "claude-test") -> Canned:
    return Canned(200, {
        "id": _next_id("msg"), "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    })


def text_message(text: str, **kwargs: Any) -> Canned:
    return message([text_block(text)], "end_turn", **kwargs)


def tool_use_message(name: str, input: dict[str, Any], *, text: str | None = None,
                     id: str | None = None, **kwargs: Any) -> Canned:
    content = ([text_block(text)] if text is not None else []) + [tool_use_block(name, input, id)]
    return message(content, "tool_use", **kwargs)


_ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "not_found_error": 404,
                 "rate_limit_error": 429, "api_error": 500, "overloaded_error": 529}


# anthropic 2.10.0 honours `retry-after` only when > 0: "0" (or no header) falls back to its own
# backoff of 0.5 s * 2**n (jittered), measured ~1.5 s for two retries. 0.01 s keeps retries fast.
FAST_RETRY_AFTER = "0.01"


def error(status: int, type: str | None = None, message: str = "scripted failure", *,
          retry_after: str | None = FAST_RETRY_AFTER, headers: dict[str, str] | None = None) -> Canned:
    """An error answer, {"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...},
    with a `retry-after` header unless `retry_after` is None."""
    if type is None:
        type = next((t for t, s in _ERROR_STATUS.items() if s == status), "api_error")
    all_headers = {"retry-after": retry_after} if retry_after is not None else {}
    all_headers.update(headers or {})
    return Canned(status, {"type": "error", "error": {"type": type, "message": message},
                           "request_id": _next_id("req")}, all_headers)


def credential(headers: dict[str, str]) -> str | None:
    """The API key a request carried: `x-api-key`, or `Authorization: Bearer` (what anthropic
    2.10.0 sends for `api_key=`)."""
    if headers.get("x-api-key"):
        return headers["x-api-key"]
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


# --- the server ---------------------------------------------------------------------------

class FakeMessagesAPI:
    def __init__(self, startup_timeout_s: float = 5.0):
        self.requests: list[Received] = []
        self._queue: deque[Canned] = deque()
        self._lock = threading.Lock()
        self._startup_timeout_s = startup_timeout_s
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.port: int | None = None

    # scripting
    def enqueue(self, *responses: Canned) -> None:
        with self._lock:
            self._queue.extend(responses)

    def reset(self) -> None:
        """Forget the script and the recorded requests (to reuse one server across tests)."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def base_url(self) -> str:
        assert self.port is not None, "server not started"
        return f"http://127.0.0.1:{self.port}"

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    # the ASGI app
    async def _messages(self, request: Request) -> JSONResponse:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        headers = {k.lower(): v for k, v in request.headers.items()}
        with self._lock:
            self.requests.append(Received(request.method, request.url.path, headers, body))
            canned = self._check(headers, body) or (self._queue.popleft() if self._queue else None)
        if canned is None:
            canned = error(500, "api_error", "fake: no canned response left", retry_after=None,
                           headers={"x-should-retry": "false"})
        return JSONResponse(canned.body, status_code=canned.status, headers=canned.headers)

    @staticmethod
    def _check(headers: dict[str, str], body: Any) -> Canned | None:
        """Reject what the real API would reject, without consuming a scripted answer."""
        no_retry = {"x-should-retry": "false"}
        if not credential(headers):
            return error(401, "authentication_error", "x-api-key header is required",
                         retry_after=None, headers=no_retry)
        if not headers.get("anthropic-version"):
            return error(400, "invalid_request_error", "anthropic-version: header is required",
                         retry_after=None, headers=no_retry)
        if not isinstance(body, dict):
            return error(400, "invalid_request_error", "body must be a JSON object",
                         retry_after=None, headers=no_retry)
        for key in ("model", "max_tokens", "messages"):
            if key not in body:
                return error(400, "invalid_request_error", f"{key}: Field required",
                             retry_after=None, headers=no_retry)
        return None

    async def _not_found(self, request: Request) -> JSONResponse:
        with self._lock:
            self.requests.append(Received(request.method, request.url.path,
                                          {k.lower(): v for k, v in request.headers.items()}, None))
        canned = error(404, "not_found_error", f"fake: no route {request.method} {request.url.path}",
                       retry_after=None, headers={"x-should-retry": "false"})
        return JSONResponse(canned.body, status_code=canned.status, headers=canned.headers)

    def _app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/messages", self._messages, methods=["POST"]),
            Route("/{path:path}", self._not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
        ])

    # lifecycle
    def start(self) -> FakeMessagesAPI:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        config = uvicorn.Config(self._app(), log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name="fake-messages-api", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"fake Messages API did not start within {self._startup_timeout_s}s")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._sock is not None:
            self._sock.close()
        self._server = self._thread = self._sock = None

    def __enter__(self) -> FakeMessagesAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
