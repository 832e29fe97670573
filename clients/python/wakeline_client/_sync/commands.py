# GENERATED from wakeline_client/_async/commands.py by clients/python/codegen/unasync.py: do not edit.
"""Commands to an existing session (`client.sessions.<verb>`): each is one POST carrying an
`Idempotency-Key` (made here unless given), answered 200 when the brain recorded its outcome
within the gateway's wait and 202 (`status="pending"`) when not."""

from __future__ import annotations

from wakeline_client import models as m
from wakeline_client import operations as ops
from wakeline_client._sync.http import Http
from wakeline_client.tool_calls import ToolResult, as_result


class SessionCommands:
    _http: Http

    def send_message(self, session_id: str, text: str, *, expected_seq: int | None = None,
                           budget: m.Budget | None = None, wait: bool = True,
                           idempotency_key: str | None = None) -> m.CommandPublic:
        """With `budget`, its caps replace those in force before the message is taken: how a
        session ended `budget` goes on (without one it raises `BudgetExhausted`)."""
        body = m.MessageCreate(text=text, expected_seq=expected_seq, budget=budget)
        return self._http.call(ops.POST_MESSAGE, {"session_id": session_id}, {"wait": wait}, body,
                                     idempotency_key)

    def send_wake(self, session_id: str, *, wait: bool = True,
                        idempotency_key: str | None = None) -> m.CommandPublic:
        """The wake command alone; `wake()` also serves the session's declared tools."""
        return self._http.call(ops.WAKE_SESSION, {"session_id": session_id}, {"wait": wait},
                                     idempotency_key=idempotency_key)

    def cancel(self, session_id: str, *, wait: bool = True,
                     idempotency_key: str | None = None) -> m.CommandPublic:
        return self._http.call(ops.CANCEL_SESSION, {"session_id": session_id}, {"wait": wait},
                                     idempotency_key=idempotency_key)

    def approve(self, session_id: str, tool_call_id: str, *, wait: bool = True,
                      idempotency_key: str | None = None) -> m.CommandPublic:
        return self._http.call(ops.APPROVE_TOOL_CALL, {"session_id": session_id, "tool_call_id": tool_call_id},
                                     {"wait": wait}, idempotency_key=idempotency_key)

    def deny(self, session_id: str, tool_call_id: str, *, reason: str | None = None, wait: bool = True,
                   idempotency_key: str | None = None) -> m.CommandPublic:
        return self._http.call(ops.DENY_TOOL_CALL, {"session_id": session_id, "tool_call_id": tool_call_id},
                                     {"wait": wait}, m.DenialCreate(reason=reason), idempotency_key)

    def take_over(self, session_id: str, *, wait: bool = True,
                        idempotency_key: str | None = None) -> m.CommandPublic:
        return self._http.call(ops.TAKE_OVER, {"session_id": session_id}, {"wait": wait},
                                     idempotency_key=idempotency_key)

    def hand_back(self, session_id: str, *, wait: bool = True,
                        idempotency_key: str | None = None) -> m.CommandPublic:
        return self._http.call(ops.HAND_BACK, {"session_id": session_id}, {"wait": wait},
                                     idempotency_key=idempotency_key)

    def submit_tool_result(self, session_id: str, tool_call_id: str, result: ToolResult | str, *,
                                 is_error: bool = False, wait: bool = True,
                                 idempotency_key: str | None = None) -> m.CommandPublic:
        """Answers a tool call. Posting the answer already recorded is 200 again (a safe retry);
        a different one raises `ToolCallAlreadyAnswered`."""
        answer = as_result(result, is_error)
        body = m.ToolResultCreate(output=answer.output, is_error=answer.is_error)
        return self._http.call(ops.SUBMIT_TOOL_RESULT, {"session_id": session_id, "tool_call_id": tool_call_id},
                                     {"wait": wait}, body, idempotency_key)
