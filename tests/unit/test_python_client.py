"""The Python client (clients/python) against a fake gateway (httpx.MockTransport): retries and
Retry-After, idempotency keys, problems as exceptions, stream resume, and the harness loops."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from wakeline_client import (
    AsyncWakeline, BudgetExhausted, Conflict, ConnectionFailed, NotFound, QuotaExceeded, RetryPolicy, ToolCall,
    ToolCallAlreadyAnswered, ToolCallsEnded, Wakeline, models, tool,
)
from wakeline_client._sync import http as sync_http
from wakeline_client.retry import parse_retry_after

KEY = "wkl_0123456789abcdef_" + "a" * 43
DONE = {"session_id": "s", "command_id": "c", "status": "done", "outcome": "tool_result", "seq": 9}
NO_WAIT = RetryPolicy(backoff_s=0, jitter=0)


class Sleeps:
    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


@pytest.fixture
def sleeps(monkeypatch) -> Sleeps:
    fake = Sleeps()
    monkeypatch.setattr(sync_http, "time", fake)
    return fake


def client_of(handler, retry: RetryPolicy = NO_WAIT) -> Wakeline:
    return Wakeline("http://gw", KEY, transport=httpx.MockTransport(handler), retry=retry)


def problem(status: int, code: str, detail: str = "no", **extra) -> httpx.Response:
    return httpx.Response(status, json={"type": f"urn:wakeline:problem:{code}", "title": "x", "status": status,
                                        "detail": detail, "code": code, **extra})


def test_a_503_is_retried_after_the_retry_after_it_names_with_the_same_idempotency_key(sleeps) -> None:
    seen: list[httpx.Request] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) < 3:
            return httpx.Response(503, headers={"Retry-After": "7"}, json={"detail": "down", "code": "unavailable"})
        return httpx.Response(200, json=DONE)

    answer = client_of(gateway, RetryPolicy(backoff_s=0.5, jitter=0)).sessions.send_wake("s")
    assert answer.status == "done" and sleeps.slept == [7.0, 7.0]
    keys = {r.headers["Idempotency-Key"] for r in seen}
    assert len(keys) == 1 and seen[0].headers["Authorization"] == f"Bearer {KEY}"


def test_backoff_doubles_on_connection_errors_then_gives_up_as_connection_failed(sleeps) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    with pytest.raises(ConnectionFailed, match="gateway unreachable at http://gw"):
        client_of(refuse, RetryPolicy(max_retries=3, backoff_s=0.5, jitter=0)).sessions.get("s")
    assert sleeps.slept == [0.5, 1.0, 2.0]


def test_each_command_gets_its_own_key_and_a_read_gets_none() -> None:
    seen: list[httpx.Request] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=DONE if request.method == "POST" else {"data": [], "count": 0,
                                                                                 "next_cursor": None})

    client = client_of(gateway)
    client.sessions.cancel("s")
    client.sessions.send_message("s", "hi", idempotency_key="mine")
    client.sessions.list(limit=5)
    assert seen[0].headers["Idempotency-Key"] not in ("mine", None) and seen[1].headers["Idempotency-Key"] == "mine"
    assert "Idempotency-Key" not in seen[2].headers and seen[2].url.params["limit"] == "5"


def test_problems_become_typed_exceptions_with_status_code_and_detail(sleeps) -> None:
    answers = {"/v1/sessions/gone": problem(404, "not_found", "no such session"),
               "/v1/sessions/s/tool-results/t": problem(409, "tool_call_already_answered", "first stands", seq=4),
               "/v1/sessions/busy": httpx.Response(429, headers={"Retry-After": "1"}, json={"detail": "slow"})}
    client = client_of(lambda request: answers[request.url.path])
    with pytest.raises(NotFound) as gone:
        client.sessions.get("gone")
    assert (gone.value.status, gone.value.code, gone.value.detail) == (404, "not_found", "no such session")
    with pytest.raises(ToolCallAlreadyAnswered) as answered:
        client.sessions.submit_tool_result("s", "t", "42")
    assert answered.value.problem["seq"] == 4 and answered.value.status == 409
    with pytest.raises(QuotaExceeded):
        client.sessions.get("busy")
    assert sleeps.slept == [1.0, 1.0, 1.0]


def test_a_quota_refusal_is_retried_then_raised_naming_the_quota_and_the_wait(sleeps) -> None:
    seen: list[httpx.Request] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(429, headers={"Retry-After": "2"}, json={
            "type": "urn:wakeline:problem:quota_exceeded", "title": "Too Many Requests", "status": 429,
            "detail": "over its quota", "code": "quota_exceeded", "quota": "commands_per_second", "limit": 5})

    with pytest.raises(QuotaExceeded) as refused:
        client_of(gateway, RetryPolicy(max_retries=2, backoff_s=0.5, jitter=0)).sessions.send_message("s", "hi")
    error = refused.value
    assert (error.status, error.code, error.quota, error.limit, error.retry_after_s) == (
        429, "quota_exceeded", "commands_per_second", 5, 2.0)
    assert sleeps.slept == [2.0, 2.0] and len({r.headers["Idempotency-Key"] for r in seen}) == 1


def test_a_message_carries_a_budget_and_a_spent_one_is_budget_exhausted() -> None:
    bodies: list[dict] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        if bodies[-1].get("budget") is None:
            return problem(409, "budget_exhausted", "the session's budget is spent", command_id="c", seq=7)
        return httpx.Response(200, json={**DONE, "outcome": "budget_changed"})

    client = client_of(gateway)
    with pytest.raises(BudgetExhausted) as spent:
        client.sessions.send_message("s", "more")
    assert isinstance(spent.value, Conflict) and spent.value.code == "budget_exhausted"
    answer = client.sessions.send_message("s", "more", budget=models.Budget(usd=5, output_tokens=2000))
    assert answer.outcome == "budget_changed" and bodies[-1]["budget"] == {"usd": 5.0, "output_tokens": 2000}


def test_retry_after_reads_seconds_and_http_dates() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
    assert parse_retry_after("5") == 5.0 and parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("Thu, 01 Jan 2026 00:00:30 GMT", now) == 30.0


class Dropping(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body that sends its text and then loses the connection (unless `ends`)."""

    def __init__(self, text: str, ends: bool = False):
        self.text, self.ends = text, ends

    def __iter__(self) -> Iterator[bytes]:
        yield self.text.encode()
        if not self.ends:
            raise httpx.ReadError("connection reset")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.text.encode()
        if not self.ends:
            raise httpx.ReadError("connection reset")


def frame(event: str, data: dict, seq: int | None = None) -> str:
    return (f"id: {seq}\n" if seq is not None else "") + f"event: {event}\ndata: {json.dumps(data)}\n\n"


def logged(seq: int, type_: str, **payload) -> dict:
    return {"session_id": "s", "seq": seq, "event_id": f"e{seq}", "tenant": "t", "actor": "system:brain",
            "trust": "data", "ts": "2026-01-01T00:00:00Z", "prev_hash": "", "hash": "", "type": type_,
            "payload": payload}


def test_the_live_stream_resumes_after_a_drop_from_the_last_event_and_ends_with_the_session() -> None:
    woke = logged(1, "woke", host="h", reason="requested", from_seq=0)
    ended = logged(2, "session_ended", reason="completed")
    bodies = [Dropping(": heartbeat\n\n" + frame("woke", woke, 1)), Dropping(frame("session_ended", ended, 2), True)]
    seen: list[httpx.Request] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, stream=bodies.pop(0), headers={"content-type": "text/event-stream"})

    events = list(client_of(gateway).sessions.stream("s"))
    assert [e.type for e in events] == ["woke", "session_ended"] and events[1].payload.reason == "completed"
    assert [r.headers["Last-Event-ID"] for r in seen] == ["0", "1"]
    assert seen[0].url.params["until_end"] == "true"


def calls_gateway(streams: list[str], posted: list[dict], answer=lambda body: httpx.Response(200, json=DONE)):
    """A session's tool-call stream (each body in turn, the last one ending) and its results route."""
    def gateway(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/tool-calls/stream"):
            text = streams.pop(0)
            return httpx.Response(200, stream=Dropping(text, ends=not streams))
        if request.url.path.endswith("/wake"):
            return httpx.Response(200, json=dict(DONE, outcome="woke"))
        posted.append({"path": request.url.path, **json.loads(request.content)})
        return answer(posted[-1])
    return gateway


def call(tool_call_id: str, name: str, **tool_input) -> str:
    return frame("tool_call", {"session_id": "s", "tool_call_id": tool_call_id, "name": name, "input": tool_input,
                               "seq": 5}, 5)


ENDED = frame("session_ended", {"session_id": "s", "seq": 12, "reason": "completed"})


def test_the_wake_stream_yields_calls_and_ends_with_the_session() -> None:
    posted: list[dict] = []
    gateway = calls_gateway([call("t1", "add", a=1, b=2) + ENDED], posted)
    with client_of(gateway).sessions.wake("s", tools=[]) as stream:
        seen = []
        for event in stream:
            seen.append(event)
            if event.type == "tool_call":
                stream.submit_tool_result(event.id, json.dumps(event.input["a"] + event.input["b"]))
    assert isinstance(seen[0], ToolCall) and seen[0].input == {"a": 1, "b": 2} and seen[0].id == "t1"
    assert isinstance(seen[1], ToolCallsEnded) and stream.ended.reason == "completed" and stream.woke.outcome == "woke"
    assert posted == [{"path": "/v1/sessions/s/tool-results/t1", "output": "3", "is_error": False}]


@tool
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


def test_harness_runs_each_call_once_though_reissued_and_turns_exceptions_into_error_results() -> None:
    posted: list[dict] = []
    runs = []
    counted = tool(lambda a, b: runs.append(1) or add(a, b), name="add")  # counts each run
    gateway = calls_gateway([call("t1", "add", a=2, b=3), call("t1", "add", a=2, b=3) + call("t2", "explode",
                             reason="boom") + call("t3", "nope") + ENDED], posted)
    ended = client_of(gateway).harness.run("s", [counted, explode])
    assert ended.reason == "completed" and len(runs) == 1
    assert [(p["path"].rsplit("/", 1)[1], p["output"], p["is_error"]) for p in posted] == [
        ("t1", "5", False), ("t1", "5", False), ("t2", "RuntimeError: boom", True),
        ("t3", "no tool named 'nope' in this harness", True)]


def test_harness_moves_on_when_another_answer_was_recorded_first() -> None:
    posted: list[dict] = []
    gateway = calls_gateway([call("t1", "add", a=1, b=1) + ENDED], posted,
                            answer=lambda body: problem(409, "tool_call_already_answered"))
    assert client_of(gateway).harness.run("s", [add]).reason == "completed" and len(posted) == 1


def test_the_tool_decorator_derives_name_description_and_input_schema() -> None:
    definition = add.definition
    assert definition["name"] == "add" and definition["description"] == "Adds two numbers."
    schema = definition["input_schema"]
    assert schema["type"] == "object" and schema["required"] == ["a", "b"]
    assert schema["properties"]["a"]["type"] == "integer"
    bad = add.invoke({"a": "x", "b": 1})
    assert bad.is_error and "invalid input" in bad.output and add(1, 2) == 3


def test_a_pool_worker_asks_for_its_tools_and_posts_to_each_calls_session() -> None:
    posted: list[dict] = []
    seen: list[httpx.Request] = []
    client: Wakeline

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/v1/tool-calls/stream":
            data = {"session_id": "other", "tool_call_id": "t9", "name": "add", "input": {"a": 4, "b": 4}, "seq": 3,
                    "lease_expires_at": "2026-01-01T00:01:00Z"}
            return httpx.Response(200, stream=Dropping(frame("tool_call", data, 3) + ": heartbeat\n\n"))
        posted.append({"path": request.url.path, **json.loads(request.content)})
        worker.stop()
        return httpx.Response(200, json=DONE)

    client = client_of(gateway)
    worker = client.pool.worker([add, explode], lease_s=60)
    worker.run()
    assert seen[0].url.params["tools"] == "add,explode" and seen[0].url.params["lease_s"] == "60"
    assert seen[0].url.params["max_in_flight"] == "1"
    assert posted == [{"path": "/v1/sessions/other/tool-results/t9", "output": "8", "is_error": False}]


async def test_the_async_harness_serves_async_and_blocking_tools() -> None:
    posted: list[dict] = []

    @tool
    async def double(n: int) -> int:
        """Doubles."""
        return 2 * n

    gateway = calls_gateway([call("t1", "double", n=21) + call("t2", "add", a=1, b=2) + ENDED], posted)
    async with AsyncWakeline("http://gw", KEY, transport=httpx.MockTransport(gateway), retry=NO_WAIT) as client:
        ended = await client.harness.run("s", [double, add])
    assert ended.reason == "completed" and [p["output"] for p in posted] == ["42", "3"]


async def test_the_async_client_retries_with_the_same_key_and_raises_typed_problems() -> None:
    seen: list[httpx.Request] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            raise httpx.ConnectError("refused")
        return problem(404, "unknown_tool_call")

    async with AsyncWakeline("http://gw", KEY, transport=httpx.MockTransport(gateway), retry=NO_WAIT) as client:
        with pytest.raises(NotFound) as unknown:
            await client.sessions.submit_tool_result("s", "t", "x")
    assert unknown.value.code == "unknown_tool_call" and type(unknown.value).__name__ == "UnknownToolCall"
    assert seen[0].headers["Idempotency-Key"] == seen[1].headers["Idempotency-Key"]


def test_a_malformed_api_key_is_refused_before_any_request() -> None:
    with pytest.raises(ValueError, match="not a Wakeline API key"):
        Wakeline("http://gw", "sk-123")
