"""What a session records when handling one of its inputs failed: `park_drafts`. Pure.

Failure stays with its session. The input is dead-lettered by the actor; here is what
the session's own log says about it, so a user sees it and the session can go on:

- a command the session has not seen → `input_rejected` with the code;
- a tool result that cannot be recorded as sent (too large, say) → an error result for
  that call, so the turn continues instead of waiting forever;
- a failure with no input to blame (the model's reply, a step of the turn) while a turn
  runs → `session_ended` with reason `error`: parked, visibly; a new message continues it.
"""

from __future__ import annotations

import json
from typing import Any

from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.log.chain import Draft
from wakeline.log.state import SessionState

SYSTEM = "system:brain"


def park_drafts(state: SessionState, item: Any, code: e.RejectionCode, reason: str) -> list[Draft]:
    reason = reason[:2000]
    if isinstance(item, c.CommandBase):
        return _reject(state, item, code, reason)
    if isinstance(item, c.ToolResultReport):
        return _failed_result(state, item, code, reason)
    if state.status == "running":
        ended = e.SessionEndedPayload(reason="error", detail=f"parked ({code}): {reason}")
        return [Draft(payload=ended, actor=SYSTEM, trust="instruction")]
    return []


def _reject(state: SessionState, cmd: c.CommandBase, code: e.RejectionCode, reason: str) -> list[Draft]:
    if state.status == "new" or state.has_seen(cmd.command_id):
        return []  # nothing to record it in, or it is already recorded
    rejected = e.InputRejectedPayload(command_id=cmd.command_id, code=code, reason=reason,
                                      expected_seq=cmd.expected_seq)
    return [Draft(payload=rejected, actor=SYSTEM, trust="instruction",
                  causation_id=cmd.command_id)]


def _failed_result(state: SessionState, report: c.ToolResultReport, code: str, reason: str) -> list[Draft]:
    if report.tool_call_id not in {p.tool_call_id for p in state.pending_tool_calls} or state.hands:
        return []
    output = json.dumps({"error_kind": code, "message": f"the result could not be recorded: {reason}",
                         "original_bytes": len(report.output.encode("utf-8"))})
    result = e.ToolResultPayload(tool_call_id=report.tool_call_id, name=report.name, output=output,
                                 is_error=True, error_kind=code, duration_ms=report.duration_ms)
    return [Draft(payload=result, actor=f"runner:{report.runner}", trust="data",
                  causation_id=c.result_input_id(report.tool_call_id))]
