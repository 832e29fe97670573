"""The cap on request bodies, enforced before a body is read into memory.

A command's event must fit in `max_record_bytes`; its request body may be larger than
the event only by JSON escaping (`\\u00e9` is six bytes for a two-byte character), so
the cap is a small multiple of the record limit. Whether the *event* fits is decided
later, on the decoded command (`admission.py`); this only stops a client from making the
gateway buffer gigabytes. A declared Content-Length over the cap is refused unread; a
chunked body is counted as it arrives.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wakeline_gateway.problem import problem_response

ESCAPING_FACTOR = 4


def body_cap(max_record_bytes: int) -> int:
    return ESCAPING_FACTOR * max_record_bytes


class BodyTooLarge(HTTPException):
    def __init__(self, cap: int):
        self.cap = cap
        super().__init__(413, f"the request body is over {cap} bytes (4 x max_record_bytes); "
                              "a command's event must fit in max_record_bytes")


class BodyLimit:
    """Pure ASGI middleware: 413 for a body over `cap` bytes."""

    def __init__(self, app: ASGIApp, cap: int):
        self.app, self.cap = app, cap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.cap:
            too_large = BodyTooLarge(self.cap)
            await problem_response(413, too_large.detail, "too_large", limit_bytes=self.cap)(scope, receive, send)
            return
        await self.app(scope, self._counted(receive), send)

    def _counted(self, receive: Receive) -> Receive:
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.cap:
                raise BodyTooLarge(self.cap)  # FastAPI passes HTTPException from body reading through
            return message

        return counted
