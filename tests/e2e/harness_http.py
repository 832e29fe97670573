"""A harness spoken in plain HTTP, for the tests of declared tools: the server's contract as
any client meets it (the Python and TypeScript clients have tests of their own).

`Frames` reads server-sent events on a thread, so a test can wait for the next call with a
bound, drop the connection mid-call (as a killed harness does), and connect again.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

import httpx

RUN_QUERY = {"name": "run_query", "description": "Run a read-only SQL query against the ledger.",
             "input_schema": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"],
                              "additionalProperties": False}}
LOOKUP = {"name": "lookup", "description": "Look a key up.",
          "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}


@dataclass
class Frames:
    """One SSE connection, read on a thread; `next()` waits (bounded) for the next frame."""

    url: str
    headers: dict[str, str]
    frames: queue.Queue = field(default_factory=queue.Queue)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _client: httpx.Client | None = None
    _response: httpx.Response | None = None

    def __enter__(self) -> "Frames":
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=None), headers=self.headers)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        assert self._client is not None
        try:
            with self._client.stream("GET", self.url) as response:
                self._response = response
                if response.status_code != 200:
                    self.frames.put(("error", {"status": response.status_code, "body": response.read().decode()}))
                    return
                event, data = "message", []
                for line in response.iter_lines():
                    if self._stop.is_set():
                        return
                    if not line:
                        if data:
                            self.frames.put((event, json.loads("\n".join(data))))
                        event, data = "message", []
                    elif line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].strip())
                self.frames.put(("closed", {}))
        except Exception as err:  # noqa: BLE001 - the test sees it as a frame
            if not self._stop.is_set():
                self.frames.put(("dropped", {"error": repr(err)}))

    def next(self, timeout: float = 30.0) -> tuple[str, dict[str, Any]]:
        try:
            return self.frames.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no frame on {self.url} within {timeout}s") from None

    def calls(self, n: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        got = []
        while len(got) < n:
            kind, body = self.next(timeout)
            assert kind == "tool_call", (kind, body, got)
            got.append(body)
        return got

    def close(self) -> None:
        """Drops the connection without a word, as a killed harness does: the socket is shut
        down under the reading thread (closing the client alone leaves a read in progress open)."""
        self._stop.set()
        stream = self._response.extensions.get("network_stream") if self._response is not None else None
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._client is not None:
            self._client.close()

    def __exit__(self, *exc: object) -> None:
        self.close()


def session_stream(base_url: str, headers: dict[str, str], session_id: str) -> Frames:
    return Frames(f"{base_url}/v1/sessions/{session_id}/tool-calls/stream", headers)


def pool_stream(base_url: str, headers: dict[str, str], tools: str, lease_s: float | None = None) -> Frames:
    suffix = f"&lease_s={lease_s}" if lease_s else ""
    return Frames(f"{base_url}/v1/tool-calls/stream?tools={tools}{suffix}", headers)


def answer(client: httpx.Client, session_id: str, tool_call_id: str, output: str, is_error: bool = False
           ) -> httpx.Response:
    return client.post(f"/v1/sessions/{session_id}/tool-results/{tool_call_id}",
                       json={"output": output, "is_error": is_error})


def create_with_tools(client: httpx.Client, policy: str, tools: list, **config: Any) -> str:
    response = client.post("/v1/sessions", json={"message": "analyse the ledger",
                                                 "config": {"model": f"scripted:{policy}", "tools": tools, **config}})
    assert response.status_code == 201, response.text
    return response.json()["session_id"]
