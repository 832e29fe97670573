# GENERATED from wakeline_client/_async/sessions.py by clients/python/codegen/unasync.py: do not edit.
"""`client.sessions`: create, list, read and delete sessions. The commands (commands.py) and
streams (streams.py) are inherited, so every session route is one attribute away."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from wakeline_client import models as m
from wakeline_client import operations as ops
from wakeline_client._sync.http import Http
from wakeline_client._sync.streams import SessionStreams


class Sessions(SessionStreams):
    def __init__(self, http: Http):
        self._http = http

    def create(self, message: str | None = None, *, title: str | None = None,
                     config: m.SessionConfig | Mapping[str, Any] | None = None, wait: bool = True,
                     idempotency_key: str | None = None) -> m.CommandPublic:
        """A new session; `config` may name declared tools (`Tool.definition`) beside built-in ones."""
        if isinstance(config, m.SessionConfig):
            config = config.model_dump(mode="json", exclude_unset=True)
        body: dict[str, Any] = {"message": message, "title": title, "config": None if config is None else dict(config)}
        if not wait:
            body["wait"] = False
        return self._http.call(ops.CREATE_SESSION, body=body, idempotency_key=idempotency_key)

    def list(self, *, limit: int | None = None, cursor: str | None = None, status: str | None = None,
                   owner: str | None = None, model: str | None = None, q: str | None = None) -> m.SessionsPublic:
        query = {"limit": limit, "cursor": cursor, "status": status, "owner": owner, "model": model, "q": q}
        return self._http.call(ops.LIST_SESSIONS, query=query)

    def iterate(self, *, page_size: int = 200, **filters: Any) -> Iterator[m.SessionListedPublic]:
        """Every session the key sees, newest first, page after page."""
        cursor = None
        while True:
            page = self.list(limit=page_size, cursor=cursor, **filters)
            for session in page.data:
                yield session
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def get(self, session_id: str) -> m.SessionPublic:
        return self._http.call(ops.GET_SESSION, {"session_id": session_id})

    def delete(self, session_id: str, *, reason: str | None = None, wait: bool = True,
                     idempotency_key: str | None = None) -> m.CommandPublic:
        return self._http.call(ops.DELETE_SESSION, {"session_id": session_id},
                                     {"reason": reason, "wait": wait}, idempotency_key=idempotency_key)

    def fork(self, session_id: str, at_seq: int, message: str, *, title: str | None = None,
                   wait: bool = True, idempotency_key: str | None = None) -> m.CommandPublic:
        body = m.ForkCreate(at_seq=at_seq, message=message, title=title, wait=wait)
        return self._http.call(ops.FORK_SESSION, {"session_id": session_id}, body=body,
                                     idempotency_key=idempotency_key)

    def tree(self, session_id: str, *, depth: int | None = None) -> m.TreeNodePublic:
        return self._http.call(ops.SESSION_TREE, {"session_id": session_id}, {"depth": depth})

    def cost(self, session_id: str) -> m.CostPublic:
        return self._http.call(ops.SESSION_COST, {"session_id": session_id})

    def events(self, session_id: str, *, after: int | None = None, before: int | None = None,
                     limit: int | None = None, type: list[str] | str | None = None) -> m.EventsPublic:
        query = {"after": after, "before": before, "limit": limit, "type": type}
        return self._http.call(ops.READ_EVENTS, {"session_id": session_id}, query)

    def transcript(self, session_id: str, *, format: str | None = None) -> Any:
        """JSON (a dict) by default; `format="markdown"` or `"html"` gives the text."""
        response = self._http.request(ops.READ_TRANSCRIPT, {"session_id": session_id}, {"format": format})
        return response.text if format in ("markdown", "html") else response.json()

    def export(self, session_id: str, *, inherited: bool | None = None) -> Iterator[str]:
        """The session's events as JSON lines, read as they come."""
        with self._http.stream(ops.EXPORT_EVENTS, {"session_id": session_id},
                                     {"inherited": inherited}) as response:
            for line in response.iter_lines():
                if line:
                    yield line

    def replay(self, session_id: str, *, check: bool | None = None) -> m.ReplayPublic:
        return self._http.call(ops.REPLAY_SESSION, {"session_id": session_id}, {"check": check})

    def verify(self, session_id: str) -> m.Report:
        return self._http.call(ops.VERIFY_SESSION, {"session_id": session_id})

    def proof(self, session_id: str) -> m.ProofPublic:
        return self._http.call(ops.INCLUSION_PROOF, {"session_id": session_id})
