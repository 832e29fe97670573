"""The async client's one way to the gateway: auth, retries, idempotency keys, typed errors.

A request that gets 429 or 503, or no answer at all, is sent again after `RetryPolicy.delay`
(honouring `Retry-After`); a command's `Idempotency-Key` is made once, before the first
attempt, and sent on every one. Any other error answer raises its `WakelineError`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
from pydantic import BaseModel

from wakeline_client.errors import ConnectionFailed, error_for
from wakeline_client.keys import auth_headers
from wakeline_client.operations import Operation
from wakeline_client.retry import RETRY_STATUSES, RetryPolicy

Params = Mapping[str, Any]
# A stream's reads wait this long for a byte: the gateway sends a heartbeat well within it.
STREAM_TIMEOUT = httpx.Timeout(30.0, read=120.0)


class AsyncHttp:
    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 30.0,
                 retry: RetryPolicy | None = None, transport: httpx.AsyncBaseTransport | None = None,
                 headers: Mapping[str, str] | None = None):
        self.base_url, self.retry = base_url.rstrip("/"), retry or RetryPolicy()
        self.client = httpx.AsyncClient(base_url=self.base_url, timeout=timeout_s, transport=transport,
                                        headers={**(headers or {}), **auth_headers(api_key)})

    async def aclose(self) -> None:
        await self.client.aclose()

    async def call(self, op: Operation, path: Params | None = None, query: Params | None = None,
                   body: BaseModel | Mapping[str, Any] | None = None, idempotency_key: str | None = None,
                   timeout: float | None = None) -> Any:
        """The operation's answer as its response model (the JSON itself when it has none)."""
        response = await self.request(op, path, query, body, idempotency_key, timeout)
        return op.response.model_validate(response.json()) if op.response else response.json()

    async def json(self, op: Operation, path: Params | None = None, query: Params | None = None,
                   body: BaseModel | Mapping[str, Any] | None = None, idempotency_key: str | None = None,
                   timeout: float | None = None) -> Any:
        """The answer's JSON as the gateway sent it (for callers that echo it, like the CLI)."""
        return (await self.request(op, path, query, body, idempotency_key, timeout)).json()

    async def request(self, op: Operation, path: Params | None = None, query: Params | None = None,
                      body: BaseModel | Mapping[str, Any] | None = None, idempotency_key: str | None = None,
                      timeout: float | None = None) -> httpx.Response:
        return await self.send(self.build(op, path, query, body, idempotency_key, timeout), stream=False)

    @asynccontextmanager
    async def stream(self, op: Operation, path: Params | None = None, query: Params | None = None,
                     headers: Mapping[str, str] | None = None) -> AsyncIterator[httpx.Response]:
        """An open response whose body is read as it comes (retried only until it opens)."""
        request = self.build(op, path, query, timeout=STREAM_TIMEOUT, headers=headers)
        response = await self.send(request, stream=True)
        try:
            yield response
        finally:
            await response.aclose()

    def build(self, op: Operation, path: Params | None = None, query: Params | None = None,
              body: BaseModel | Mapping[str, Any] | None = None, idempotency_key: str | None = None,
              timeout: float | httpx.Timeout | None = None, headers: Mapping[str, str] | None = None
              ) -> httpx.Request:
        headers = dict(headers or {})
        if op.command:
            headers["Idempotency-Key"] = idempotency_key or str(uuid.uuid4())
        if isinstance(body, BaseModel):
            body = body.model_dump(mode="json", exclude_unset=True)
        return self.client.build_request(op.method, op.url(**(path or {})), params=_query(query), json=body,
                                         headers=headers, timeout=httpx.USE_CLIENT_DEFAULT if timeout is None
                                         else timeout)

    async def send(self, request: httpx.Request, stream: bool) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = await self.client.send(request, stream=stream)
            except httpx.TransportError as err:
                if attempt >= self.retry.max_retries:
                    raise ConnectionFailed(f"gateway unreachable at {self.base_url}: "
                                           f"{type(err).__name__}: {err}") from err
                await asyncio.sleep(self.retry.delay(attempt))
                attempt += 1
                continue
            if response.status_code in RETRY_STATUSES and attempt < self.retry.max_retries:
                await response.aclose()
                await asyncio.sleep(self.retry.delay(attempt, response.headers.get("Retry-After")))
                attempt += 1
                continue
            if response.status_code >= 400:
                await response.aread()
                await response.aclose()
                raise error_for(response)
            return response


def _query(query: Params | None) -> dict[str, Any]:
    """None leaves a parameter out; a bool is sent as the gateway reads it (`true`/`false`)."""
    out: dict[str, Any] = {}
    for name, value in (query or {}).items():
        if value is not None:
            out[name] = str(value).lower() if isinstance(value, bool) else value
    return out
