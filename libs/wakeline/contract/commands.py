"""Inputs to a session: commands on `wakeline.inbox` and the records runners exchange.

Commands are imperative and become events only when the brain sequences them; anyone can
produce them (the gateway, any Kafka client). `docs/commands.schema.json` is generated
from `Command` for producers that are not written in Python.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter

from wakeline.contract.budget import Budget
from wakeline.contract.events import Frozen, SessionConfig
from wakeline.contract.ids import ID, PRINTABLE, Actor


class CommandBase(Frozen):
    command_id: ID
    session_id: ID
    tenant: ID = "default"
    actor: Actor = "user:anonymous"
    # Set by a caller that must not race another: the brain refuses the command when the
    # session's last seq differs (the gateway turns that into 409).
    expected_seq: int | None = Field(default=None, ge=0)


class ForkOrigin(Frozen):
    """Where a fork starts: its parent's seq, and (optionally) the parent's hash there, which
    the brain then checks against the log it reads."""

    session_id: ID
    seq: int = Field(ge=1)
    hash: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


class CreateSession(CommandBase):
    type: Literal["create_session"] = "create_session"
    config: SessionConfig = SessionConfig()
    message: str | None = None
    title: str | None = None
    fork_of: ForkOrigin | None = None


class PostMessage(CommandBase):
    type: Literal["post_message"] = "post_message"
    text: str = Field(min_length=1, max_length=1_000_000)
    # Caps to set before the message is taken (issue 34): those named replace the ones in
    # force, recorded as `budget_changed`; how a session ended `budget` is continued. Left
    # out of the dump when absent, so a command's digest (and a keyed retry's id) is as before.
    budget: Budget | None = Field(default=None, exclude_if=lambda v: v is None)


class ApproveToolCall(CommandBase):
    type: Literal["approve_tool_call"] = "approve_tool_call"
    tool_call_id: ID


class DenyToolCall(CommandBase):
    type: Literal["deny_tool_call"] = "deny_tool_call"
    tool_call_id: ID
    reason: str | None = None


class CancelSession(CommandBase):
    type: Literal["cancel_session"] = "cancel_session"


class WakeSession(CommandBase):
    type: Literal["wake_session"] = "wake_session"


class DeleteSession(CommandBase):
    type: Literal["delete_session"] = "delete_session"
    reason: str | None = None


class TakeOver(CommandBase):
    type: Literal["take_over"] = "take_over"


class HandBack(CommandBase):
    type: Literal["hand_back"] = "hand_back"


class SubmitToolResult(CommandBase):
    """Whoever holds the hands (`human:<principal>` or `service:<principal>`) answers a pending tool call."""

    type: Literal["submit_tool_result"] = "submit_tool_result"
    tool_call_id: ID
    output: str
    is_error: bool = False


Command = Annotated[
    Union[
        CreateSession, PostMessage, ApproveToolCall, DenyToolCall, CancelSession,
        WakeSession, DeleteSession, TakeOver, HandBack, SubmitToolResult,
    ],
    Field(discriminator="type"),
]
COMMAND_ADAPTER: TypeAdapter[Command] = TypeAdapter(Command)


def parse_command(data: bytes | str | dict[str, Any]) -> CommandBase:
    """Decodes one command; raises `pydantic.ValidationError` naming what is wrong."""
    if isinstance(data, (str, bytes)):
        return COMMAND_ADAPTER.validate_json(data)
    return COMMAND_ADAPTER.validate_python(data)


class ToolCallRequest(Frozen):
    """brain -> runner on `wakeline.tool-calls`; `tool_call_id` is the idempotency key."""

    session_id: ID
    tenant: ID
    tool_call_id: ID
    name: str = Field(min_length=1, max_length=200)  # any text: an unknown tool gets an error result
    input: dict[str, Any]
    timeout_s: float = 30.0
    causation_seq: int
    # The brain's clock when it issued (or re-issued) the call: a runner does not start a
    # call that sat in the topic for longer than it is willing to trust.
    issued_at: datetime | None = None
    # The tenant's tool calls in flight quota as the brain last read it: a runner runs at most
    # this many of the tenant's calls at once, the rest wait (None: no bound). Per runner.
    tenant_calls_in_flight: int | None = Field(default=None, ge=1)


class ToolResultReport(Frozen):
    """runner -> brain on `wakeline.tool-results`."""

    session_id: ID
    tenant: ID
    tool_call_id: ID
    name: str = Field(min_length=1, max_length=200)  # any text: an unknown tool gets an error result
    output: str
    is_error: bool = False
    error_kind: str | None = None
    duration_ms: int = 0
    runner: str = Field(min_length=1, max_length=200, pattern=PRINTABLE)
    replayed: bool = False


def result_input_id(tool_call_id: str) -> str:
    """The causation id of the event that records a runner's result for this call."""
    return f"result:{tool_call_id}"
