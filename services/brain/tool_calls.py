"""Issuing a session's tool calls: to the runners, or a timer while its harness answers.

`call_records` turns the pending calls the runners answer into records for the tool-calls
topic, which `SessionLog.write` sends in the same transaction as the events that made them
issuable; on wake every pending call is issued again with the same id (a runner returns the
result it recorded). Each carries the tenant's tool calls in flight quota, which the runner
holds it to (`TenantQuotas.calls_in_flight`). A declared tool's call is the session's own harness's and never goes
to a runner: where the config sets `client_tool_timeout_s`, `ClientCallTimers` mails the
actor a `ClientTimeout` once the call has waited that long.
"""

from __future__ import annotations

import asyncio

from wakeline.contract import commands as c
from wakeline.contract.codec import encode
from wakeline.contract.limits import check_record
from wakeline.contract.topics import TOOL_CALLS, record_key
from wakeline.log.state import SessionState
from wakeline_brain.actor_deps import ActorView
from wakeline_brain.mail import ClientTimeout
from wakeline_brain.writer import Record


def call_records(actor: ActorView, state: SessionState, issued: set[str]) -> dict[str, Record]:
    """The records of the pending calls not `issued` yet that a runner may run now, by call id."""
    if state.hands is not None or state.status in ("ended", "deleted"):
        return {}
    records = {}
    quotas = actor.deps.tenant_quotas
    calls_in_flight = quotas.calls_in_flight(actor.tenant) if quotas is not None else None
    for call in state.pending_tool_calls:
        if call.tool_call_id in issued or call.tool_call_id in state.awaiting_approval:
            continue
        if call.answered_by == "client":
            continue  # the session's own harness answers it (GET .../tool-calls/stream), never a runner
        request = c.ToolCallRequest(session_id=actor.session_id, tenant=actor.tenant,
                                    tool_call_id=call.tool_call_id, name=call.name, input=call.input,
                                    timeout_s=state.config.tool_timeout_s, causation_seq=state.last_seq,
                                    issued_at=actor.deps.now(), tenant_calls_in_flight=calls_in_flight)
        value = encode(request)
        check_record(value, actor.deps.max_record_bytes, f"tool call {call.tool_call_id}")
        records[call.tool_call_id] = Record(TOOL_CALLS, record_key(actor.session_id), value)
    return records


class ClientCallTimers:
    """A timer per declared tool's call waiting for the harness."""

    def __init__(self, actor: ActorView):
        self._actor = actor
        self._timers: dict[str, asyncio.Task[None]] = {}

    def __bool__(self) -> bool:
        """A call is on a timer: evicted, nothing would end its wait."""
        return bool(self._timers)

    def time(self, state: SessionState) -> None:
        """Starts the timer of each declared tool's call that waits for the harness and has
        none, and stops those of calls no longer pending. The wait is counted from the write
        of the call, or from the wake on a brain that took the session over (its timer is gone)."""
        limit = state.config.client_tool_timeout_s
        waiting = {call.tool_call_id for call in state.pending_tool_calls if call.answered_by == "client"}
        for call_id in list(self._timers):
            if call_id not in waiting:
                self._timers.pop(call_id).cancel()
        if limit is None:
            return
        for call_id in waiting - set(self._timers):
            async def expire(call_id: str = call_id) -> None:
                await asyncio.sleep(limit)
                await self._actor.mailbox.put(ClientTimeout(call_id))
            self._timers[call_id] = asyncio.create_task(expire())

    def expired(self, call_id: str) -> None:
        self._timers.pop(call_id, None)

    def cancel(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
