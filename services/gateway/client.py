"""A small synchronous HTTP client of the gateway, for the `wakeline` command line.

Errors come back as `GatewayError` carrying the API's `detail`, so the CLI prints what
the server said. `follow` reads the server-sent event stream and reconnects with
`Last-Event-ID` when the connection drops, so no event is skipped or repeated.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpx


class GatewayError(Exception):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def parse_sse(lines: Iterable[str]) -> Iterator[tuple[str | None, str, str]]:
    """(id, event, data) per frame; comments (heartbeats) are skipped."""
    frame_id, event, data = None, "message", []
    for line in lines:
        if not line:
            if data:
                yield frame_id, event, "\n".join(data)
            frame_id, event, data = None, "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            frame_id = value
        elif name == "event":
            event = value
        elif name == "data":
            data.append(value)


class GatewayClient:
    def __init__(self, base_url: str, timeout_s: float = 30.0, transport: httpx.BaseTransport | None = None,
                 retry_s: float = 0.5, api_key: str | None = None):
        self.base_url = base_url.rstrip("/")
        self.retry_s = retry_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s, transport=transport, headers=headers)

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._http.close()

    def call(self, method: str, path: str, **options: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **options)
        except httpx.TransportError as err:
            raise GatewayError(f"gateway unreachable at {self.base_url}: {type(err).__name__}: {err}") from err
        if response.status_code >= 400:
            raise GatewayError(f"{response.status_code}: {_detail(response)}", response.status_code)
        return response

    def json(self, method: str, path: str, **options: Any) -> Any:
        return self.call(method, path, **options).json()

    def lines(self, method: str, path: str, **options: Any) -> Iterator[str]:
        """A streamed answer, line by line (exports)."""
        try:
            with self._http.stream(method, path, **options) as response:
                if response.status_code >= 400:
                    response.read()
                    raise GatewayError(f"{response.status_code}: {_detail(response)}", response.status_code)
                yield from response.iter_lines()
        except httpx.TransportError as err:
            raise GatewayError(f"gateway unreachable at {self.base_url}: {type(err).__name__}: {err}") from err

    def follow(self, session_id: str, after: int = 0, appear_within_s: float = 30.0,
               deltas: bool = False) -> Iterator[dict[str, Any]]:
        """Yields events until the session ends (or is deleted), reconnecting as needed; with
        `deltas`, also the model's text as it streams, as `{"type": "delta", ...}` (no seq)."""
        deadline = time.monotonic() + appear_within_s
        while True:
            try:
                for event in self._stream_once(session_id, after, deltas):
                    if event["type"] == "delta":
                        yield event
                        continue
                    after = event["seq"]
                    yield event
                    if event["type"] in ("session_ended", "deleted"):
                        return
            except GatewayError as err:
                # A session created a moment ago may not be archived yet: 404 for a while.
                if err.status != 404 or time.monotonic() > deadline:
                    raise
                time.sleep(self.retry_s)
            except httpx.TransportError:
                time.sleep(self.retry_s)  # dropped: resume from the last seq we printed

    def _stream_once(self, session_id: str, after: int, deltas: bool = False) -> Iterator[dict[str, Any]]:
        path = f"/v1/sessions/{session_id}/stream"
        params, headers = {"until_end": "true"}, {"Last-Event-ID": str(after)}
        if deltas:
            params["deltas"] = "true"
        timeout = httpx.Timeout(30.0, read=120.0)  # the server sends a heartbeat well within this
        with self._http.stream("GET", path, params=params, headers=headers, timeout=timeout) as response:
            if response.status_code >= 400:
                response.read()
                raise GatewayError(f"{response.status_code}: {_detail(response)}", response.status_code)
            for _, kind, data in parse_sse(response.iter_lines()):
                yield {"type": "delta", **json.loads(data)} if kind == "delta" else json.loads(data)


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    if isinstance(body, dict) and "detail" in body:
        # A problem's type/title/status only restate the status line already printed.
        extra = {k: v for k, v in body.items() if k not in ("detail", "errors", "type", "title", "status")}
        return f"{body['detail']}" + (f" {json.dumps(extra)}" if extra else "")
    return json.dumps(body)[:500]
