"""Sessions driven over the gateway's HTTP API: create one, read its status, wait for it.

Waits poll with a bound and, on timeout, print every service's log tail.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

if TYPE_CHECKING:  # stack.py imports this module to warm a stack up
    from tests.e2e.stack import Stack

T = TypeVar("T")


def create_session(client: httpx.Client, policy: str, message: str = "go", **config: Any) -> str:
    response = client.post("/v1/sessions", json={"message": message,
                                                 "config": {"model": f"scripted:{policy}", **config}})
    assert response.status_code == 201, response.text
    return response.json()["session_id"]


def wait_for(predicate: Callable[[], T], timeout: float, what: str, stack: Stack | None = None,
             every: float = 0.25) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{stack.report() if stack else ''}")


def session_status(client: httpx.Client, session_id: str) -> dict | None:
    response = client.get(f"/v1/sessions/{session_id}")
    return response.json() if response.status_code == 200 else None


def wait_ended(client: httpx.Client, stack: Stack, session_id: str, timeout: float = 90) -> dict:
    def ended() -> dict | None:
        s = session_status(client, session_id)
        return s if s and s["status"] == "ended" else None
    return wait_for(ended, timeout, f"session {session_id} to end", stack)


def warm_up(stack: Stack, timeout: float = 120) -> None:
    """Waits until a session goes all the way through: a previous module's processes may
    still hold group memberships until their session timeouts expire."""
    with httpx.Client(base_url=stack.url, timeout=30, headers=stack.headers) as client:
        response = client.post("/v1/sessions", json={"message": "warm-up", "wait": False,
                                                     "config": {"model": "scripted:tools3"}})
        assert response.status_code in (201, 202), response.text
        wait_ended(client, stack, response.json()["session_id"], timeout=timeout)
