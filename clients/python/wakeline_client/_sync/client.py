# GENERATED from wakeline_client/_async/client.py by clients/python/codegen/unasync.py: do not edit.
"""`Wakeline`: the async client of the gateway, every route one attribute away.

    with Wakeline("http://127.0.0.1:18080", api_key) as client:
        created = client.sessions.create("count the words")
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from wakeline_client import models as m
from wakeline_client import operations as ops
from wakeline_client._sync.audit import Audit, Tenant
from wakeline_client._sync.harness import Harness
from wakeline_client._sync.http import Http
from wakeline_client._sync.pool import Pool
from wakeline_client._sync.sessions import Sessions
from wakeline_client.retry import RetryPolicy

DEFAULT_URL = "http://127.0.0.1:18080"


class Wakeline:
    def __init__(self, base_url: str = DEFAULT_URL, api_key: str | None = None, *, timeout_s: float = 30.0,
                 retry: RetryPolicy | None = None, transport: httpx.BaseTransport | None = None,
                 headers: Mapping[str, str] | None = None):
        self.http = Http(base_url, api_key, timeout_s, retry, transport, headers)
        self.sessions = Sessions(self.http)
        self.audit = Audit(self.http)
        self.tenant = Tenant(self.http)
        self.harness = Harness(self.sessions)
        self.pool = Pool(self.http, self.sessions)

    @property
    def base_url(self) -> str:
        return self.http.base_url

    def __enter__(self) -> Wakeline:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def me(self) -> m.MePublic:
        return self.http.call(ops.WHO_AM_I)

    def health(self) -> m.HealthPublic:
        return self.http.call(ops.HEALTHZ)
