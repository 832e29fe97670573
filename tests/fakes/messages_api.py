"""A scriptable local server that speaks the Anthropic Messages API wire format.

Tests drive the real `anthropic` SDK against it, so the external model is never reached:

    with FakeMessagesAPI() as api:
        api.enqueue(error(429, "rate_limit_error"), text_message("hi"))
        model = ClaudeModel("claude-test", "test-key", base_url=api.base_url)
        ...
        assert len(api.requests) == 2

Each test enqueues canned responses; each POST /v1/messages pops the next one and the server
records what it received (headers and JSON body). With the queue empty, a `responder` set by
`respond_with` answers instead (for many concurrent sessions, where no order is known).

A request with `"stream": true` gets the canned message as the API streams it: server-sent
events `message_start`, `content_block_start` / `content_block_delta` (text_delta,
thinking_delta, signature_delta, input_json_delta) / `content_block_stop` per block, `ping`,
`message_delta` (stop reason, output usage) and `message_stop`. A `Canned` with `cut_after`
drops the connection after that many events, as a lost stream does.
`POST /v1/messages/count_tokens` answers `{"input_tokens": n}`, n a deterministic count of
the body (its JSON length / 4). The server checks what the real API requires
(an API key in `x-api-key` or `Authorization: Bearer`, an `anthropic-version` header, and
`model`, `max_tokens`, `messages` in the body) and answers like the real API when something
is missing, so a client that forgets them fails the test. It also refuses, with the API's
400 `invalid_request_error`, what the API refuses that the brain's prompt caching and
thinking could get wrong: more than four `cache_control` breakpoints, one on a thinking
block, and (thinking on) a thinking block without its signature, or a request ending with
tool results whose assistant turn does not start with its thinking blocks.
`cut_tool_use_block` streams a tool input cut part-way (a reply cut at max_tokens),
`server_tool_use_block` a server tool's use (a pause_turn reply). An exhausted queue answers 500 with
`x-should-retry: false`, so a test that scripted too few responses fails fast instead of
hanging in the SDK's retry loop.

The server is uvicorn on 127.0.0.1 with a random free port, in a background thread.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

_ids = itertools.count(1)


@dataclass(frozen=True)
class Canned:
    """One scripted HTTP answer."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None  # streamed: drop the connection after this many events
    pace_s: float = 0.0  # streamed: wait this long before each event (a slow model)


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


def cut_tool_use_block(name: str, partial_json: str, id: str | None = None) -> dict[str, Any]:
    """A tool_use the reply hit max_tokens while writing: streamed, its input is `partial_json`
    (JSON cut part-way) as the API sends it, so the SDK gets what it makes of a cut input.
    Not streamed, its input is `{}`. `_partial_json` is the fake's own and never sent."""
    return {"type": "tool_use", "id": id or _next_id("toolu"), "name": name, "input": {},
            "_partial_json": partial_json}


def server_tool_use_block(name: str, input: dict[str, Any], id: str | None = None) -> dict[str, Any]:
    """A server tool's use (web search, say), which the API runs itself; a `pause_turn` reply
    may end on one, for the client to send back so the API resumes."""
    return {"type": "server_tool_use", "id": id or _next_id("srvtoolu"), "name": name, "input": input}


def thinking_block(thinking: str, signature: str = "sig-fake") -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


REDACTED_DATA = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"  # opaque, as the API sends it


def redacted_thinking_block(data: str = REDACTED_DATA) -> dict[str, Any]:
    return {"type": "redacted_thinking", "data": data}


def message(content: list[dict[str, Any]], stop_reason: str = "end_turn", *, input_tokens: int = 10,
            output_tokens: int = 5, model: str = "claude-test", cache_creation_input_tokens: int = 0,
            cache_read_input_tokens: int = 0, cut_after: int | None = None, pace_s: float = 0.0) -> Canned:
    return Canned(200, {
        "id": _next_id("msg"), "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_creation_input_tokens": cache_creation_input_tokens,
                  "cache_read_input_tokens": cache_read_input_tokens},
    }, cut_after=cut_after, pace_s=pace_s)


def sse_events(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A message as the API streams it: (event name, data) in wire order. Text and thinking
    come in two deltas each, a tool's input as two pieces of its JSON, so a client that
    keeps only the last delta fails."""
    usage = body["usage"]
    start = {**body, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": 1}}
    out: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(body["content"]):
        kind = block["type"]
        if kind == "text":
            first = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _halves(block["text"])]
        elif kind == "thinking":
            first = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": piece} for piece in _halves(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind in ("tool_use", "server_tool_use"):
            wire = block.get("_partial_json")
            first = {k: v for k, v in block.items() if k != "_partial_json"} | {"input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": piece}
                      for piece in _halves(wire if wire is not None else json.dumps(block["input"]))]
        else:  # redacted_thinking and anything else: whole in its start
            first, deltas = block, []
        out.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": first}))
        if i == 0:
            out.append(("ping", {"type": "ping"}))
        out += [("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}) for d in deltas]
        out.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
                                  "usage": {"output_tokens": usage["output_tokens"]}}))
    out.append(("message_stop", {"type": "message_stop"}))
    return out


def _halves(text: str) -> list[str]:
    cut = len(text) // 2
    return [piece for piece in (text[:cut], text[cut:]) if piece]


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


def _unstreamed(body: dict[str, Any]) -> dict[str, Any]:
    """A canned body as a non-streamed answer: without the fake's own keys."""
    if not isinstance(body.get("content"), list):
        return body
    return {**body, "content": [{k: v for k, v in b.items() if k != "_partial_json"} for b in body["content"]]}


# --- what the real API refuses ------------------------------------------------------------------

MAX_CACHE_BREAKPOINTS = 4


def _blocks_of(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, block) for every block of the request that may carry `cache_control`."""
    out = [(f"tools.{i}", t) for i, t in enumerate(body.get("tools") or []) if isinstance(t, dict)]
    system = body.get("system")
    if isinstance(system, list):
        out += [(f"system.{i}", b) for i, b in enumerate(system) if isinstance(b, dict)]
    for i, m in enumerate(body.get("messages") or []):
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            out += [(f"messages.{i}.content.{j}", b) for j, b in enumerate(content) if isinstance(b, dict)]
    return out


def _cache_control_problem(body: dict[str, Any]) -> str | None:
    """The API refuses more than four breakpoints, and one on a thinking block."""
    marked = [(where, b) for where, b in _blocks_of(body) if "cache_control" in b]
    if len(marked) > MAX_CACHE_BREAKPOINTS:
        return (f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(marked)}.")
    for where, block in marked:
        if block.get("type") in ("thinking", "redacted_thinking"):
            return f"{where}.{block['type']}.cache_control: Extra inputs are not permitted"
    return None


def _thinking_problem(body: dict[str, Any]) -> str | None:
    """With thinking enabled, the API wants the assistant turn whose tool results the request
    ends with to start with its thinking (as it was returned: a thinking block with its
    signature, or a redacted one), and every thinking block sent back to keep its signature."""
    thinking = body.get("thinking")
    if not (isinstance(thinking, dict) and thinking.get("type") == "enabled"):
        return None
    for where, block in _blocks_of(body):
        if block.get("type") == "thinking" and not block.get("signature"):
            return f"{where}.thinking.signature: Field required"
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if len(messages) < 2 or messages[-1].get("role") != "user":
        return None
    last = messages[-1].get("content")
    if not (isinstance(last, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last)):
        return None
    turn = messages[-2]
    content = turn.get("content") if turn.get("role") == "assistant" else None
    if not isinstance(content, list) or not any(b.get("type") == "tool_use" for b in content if isinstance(b, dict)):
        return None
    first = content[0].get("type") if content and isinstance(content[0], dict) else None
    if first not in ("thinking", "redacted_thinking"):
        return (f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                f"but found `{first}`. When `thinking` is enabled, a final `assistant` message must start "
                "with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "
                "We recommend you include thinking blocks from previous turns.")
    return None


# --- the server ---------------------------------------------------------------------------

class FakeMessagesAPI:
    def __init__(self, startup_timeout_s: float = 5.0):
        self.requests: list[Received] = []
        self.received_at: list[float] = []  # time.monotonic() of each request, in order
        self._queue: deque[Canned] = deque()
        self._responder: Callable[[Any], Canned] | None = None
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

    def respond_with(self, responder: Callable[[Any], Canned] | None) -> None:
        """What answers a messages request (its JSON body) once the queue is empty; called
        under the server's lock, so it may keep counts."""
        with self._lock:
            self._responder = responder

    def reset(self) -> None:
        """Forget the script and the recorded requests (to reuse one server across tests)."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.received_at.clear()
            self._responder = None

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def base_url(self) -> str:
        assert self.port is not None, "server not started"
        return f"http://127.0.0.1:{self.port}"

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests if r.path == "/v1/messages"]

    # the ASGI app
    async def _count_tokens(self, request: Request) -> JSONResponse:
        raw = await request.body()
        body: Any = json.loads(raw) if raw else None
        headers = {k.lower(): v for k, v in request.headers.items()}
        with self._lock:
            self.requests.append(Received(request.method, request.url.path, headers, body))
            self.received_at.append(time.monotonic())
        canned = self._check(headers, body, ("model", "messages"))
        if canned is not None:
            return JSONResponse(canned.body, status_code=canned.status, headers=canned.headers)
        return JSONResponse({"input_tokens": len(json.dumps(body, sort_keys=True)) // 4})

    async def _messages(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        headers = {k.lower(): v for k, v in request.headers.items()}
        with self._lock:
            self.requests.append(Received(request.method, request.url.path, headers, body))
            self.received_at.append(time.monotonic())
            canned = self._check(headers, body) or (self._queue.popleft() if self._queue else None)
            if canned is None and self._responder is not None:
                canned = self._responder(body)
        if canned is None:
            canned = error(500, "api_error", "fake: no canned response left", retry_after=None,
                           headers={"x-should-retry": "false"})
        if canned.status == 200 and isinstance(body, dict) and body.get("stream"):
            return StreamingResponse(self._stream(canned), media_type="text/event-stream",
                                     headers={"cache-control": "no-cache", **canned.headers})
        return JSONResponse(_unstreamed(canned.body), status_code=canned.status, headers=canned.headers)

    @staticmethod
    async def _stream(canned: Canned) -> AsyncIterator[bytes]:
        for n, (name, data) in enumerate(sse_events(canned.body)):
            if canned.pace_s:
                await asyncio.sleep(canned.pace_s)
            if canned.cut_after is not None and n >= canned.cut_after:
                raise ConnectionAbortedError("fake: the stream is cut")  # uvicorn drops the connection
            yield f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    @staticmethod
    def _check(headers: dict[str, str], body: Any,
               required: tuple[str, ...] = ("model", "max_tokens", "messages")) -> Canned | None:
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
        for key in required:
            if key not in body:
                return error(400, "invalid_request_error", f"{key}: Field required",
                             retry_after=None, headers=no_retry)
        problem = _cache_control_problem(body) or _thinking_problem(body)
        if problem is not None:
            return error(400, "invalid_request_error", problem, retry_after=None, headers=no_retry)
        return None

    async def _not_found(self, request: Request) -> JSONResponse:
        with self._lock:
            self.requests.append(Received(request.method, request.url.path,
                                          {k.lower(): v for k, v in request.headers.items()}, None))
            self.received_at.append(time.monotonic())
        canned = error(404, "not_found_error", f"fake: no route {request.method} {request.url.path}",
                       retry_after=None, headers={"x-should-retry": "false"})
        return JSONResponse(canned.body, status_code=canned.status, headers=canned.headers)

    def _app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/messages", self._messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
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
