"""`AsyncWakeline`: the async client of the gateway, every route one attribute away.

    async with AsyncWakeline("http://127.0.0.1:18080", api_key) as client:
        created = await client.sessions.create("count the words")
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from wakeline_client import models as m
from wakeline_client import operations as ops
from wakeline_client._async.audit import AsyncAudit, AsyncTenant
from wakeline_client._async.harness import AsyncHarness
from wakeline_client._async.http import AsyncHttp
from wakeline_client._async.pool import AsyncPool
from wakeline_client._async.sessions import AsyncSessions
from wakeline_client.retry import RetryPolicy

DEFAULT_URL = "http://127.0.0.1:18080"


class AsyncWakeline:
    def __init__(self, base_url: str = DEFAULT_URL, api_key: str | None = None, *, timeout_s: float = 30.0,
                 retry: RetryPolicy | None = None, transport: httpx.AsyncBaseTransport | None = None,
                 headers: Mapping[str, str] | None = None):
        self.http = AsyncHttp(base_url, api_key, timeout_s, retry, transport, headers)
        self.sessions = AsyncSessions(self.http)
        self.audit = AsyncAudit(self.http)
        self.tenant = AsyncTenant(self.http)
        self.harness = AsyncHarness(self.sessions)
        self.pool = AsyncPool(self.http, self.sessions)

    @property
    def base_url(self) -> str:
        return self.http.base_url

    async def __aenter__(self) -> AsyncWakeline:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def me(self) -> m.MePublic:
        return await self.http.call(ops.WHO_AM_I)

    async def health(self) -> m.HealthPublic:
        return await self.http.call(ops.HEALTHZ)
