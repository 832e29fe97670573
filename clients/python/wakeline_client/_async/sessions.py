"""`client.sessions`: create, list, read and delete sessions. The commands (commands.py) and
streams (streams.py) are inherited, so every session route is one attribute away."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from wakeline_client import models as m
from wakeline_client import operations as ops
from wakeline_client._async.http import AsyncHttp
from wakeline_client._async.streams import AsyncSessionStreams


class AsyncSessions(AsyncSessionStreams):
    def __init__(self, http: AsyncHttp):
        self._http = http

    async def create(self, message: str | None = None, *, title: str | None = None,
                     config: m.SessionConfig | Mapping[str, Any] | None = None, wait: bool = True,
                     idempotency_key: str | None = None) -> m.CommandPublic:
        """A new session; `config` may name declared tools (`Tool.definition`) beside built-in ones."""
        if isinstance(config, m.SessionConfig):
            config = config.model_dump(mode="json", exclude_unset=True)
        body: dict[str, Any] = {"message": message, "title": title, "config": None if config is None else dict(config)}
        if not wait:
            body["wait"] = False
        return await self._http.call(ops.CREATE_SESSION, body=body, idempotency_key=idempotency_key)

    async def list(self, *, limit: int | None = None, cursor: str | None = None, status: str | None = None,
                   owner: str | None = None, model: str | None = None, q: str | None = None) -> m.SessionsPublic:
        query = {"limit": limit, "cursor": cursor, "status": status, "owner": owner, "model": model, "q": q}
        return await self._http.call(ops.LIST_SESSIONS, query=query)

    async def iterate(self, *, page_size: int = 200, **filters: Any) -> AsyncIterator[m.SessionListedPublic]:
        """Every session the key sees, newest first, page after page."""
        cursor = None
        while True:
            page = await self.list(limit=page_size, cursor=cursor, **filters)
            for session in page.data:
                yield session
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def get(self, session_id: str) -> m.SessionPublic:
        return await self._http.call(ops.GET_SESSION, {"session_id": session_id})

    async def delete(self, session_id: str, *, reason: str | None = None, wait: bool = True,
                     idempotency_key: str | None = None) -> m.CommandPublic:
        return await self._http.call(ops.DELETE_SESSION, {"session_id": session_id},
                                     {"reason": reason, "wait": wait}, idempotency_key=idempotency_key)

    async def fork(self, session_id: str, at_seq: int, message: str, *, title: str | None = None,
                   wait: bool = True, idempotency_key: str | None = None) -> m.CommandPublic:
        body = m.ForkCreate(at_seq=at_seq, message=message, title=title, wait=wait)
        return await self._http.call(ops.FORK_SESSION, {"session_id": session_id}, body=body,
                                     idempotency_key=idempotency_key)

    async def tree(self, session_id: str, *, depth: int | None = None) -> m.TreeNodePublic:
        return await self._http.call(ops.SESSION_TREE, {"session_id": session_id}, {"depth": depth})

    async def cost(self, session_id: str) -> m.CostPublic:
        return await self._http.call(ops.SESSION_COST, {"session_id": session_id})

    async def events(self, session_id: str, *, after: int | None = None, before: int | None = None,
                     limit: int | None = None, type: list[str] | str | None = None) -> m.EventsPublic:
        query = {"after": after, "before": before, "limit": limit, "type": type}
        return await self._http.call(ops.READ_EVENTS, {"session_id": session_id}, query)

    async def transcript(self, session_id: str, *, format: str | None = None) -> Any:
        """JSON (a dict) by default; `format="markdown"` or `"html"` gives the text."""
        response = await self._http.request(ops.READ_TRANSCRIPT, {"session_id": session_id}, {"format": format})
        return response.text if format in ("markdown", "html") else response.json()

    async def export(self, session_id: str, *, inherited: bool | None = None) -> AsyncIterator[str]:
        """The session's events as JSON lines, read as they come."""
        async with self._http.stream(ops.EXPORT_EVENTS, {"session_id": session_id},
                                     {"inherited": inherited}) as response:
            async for line in response.aiter_lines():
                if line:
                    yield line

    async def replay(self, session_id: str, *, check: bool | None = None) -> m.ReplayPublic:
        return await self._http.call(ops.REPLAY_SESSION, {"session_id": session_id}, {"check": check})

    async def verify(self, session_id: str) -> m.Report:
        return await self._http.call(ops.VERIFY_SESSION, {"session_id": session_id})

    async def proof(self, session_id: str) -> m.ProofPublic:
        return await self._http.call(ops.INCLUSION_PROOF, {"session_id": session_id})
