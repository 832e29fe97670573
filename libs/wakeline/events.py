"""The session log's event types: frozen pydantic models, one per `type`, one union.

Only the shapes live here. Sequencing and hashing are in `chain.py`; what the events
mean for a session's state is in `fold.py`. Events are past tense and never change once
sealed: `seq`, `prev_hash` and `hash` are assigned by the brain, the only writer.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

GENESIS_HASH = "0" * 64

Trust = Literal["instruction", "data"]
EndReason = Literal["completed", "max_turns", "error", "interrupted", "cancelled"]
# Why the brain refused an input: machine-readable, so the gateway maps it to an HTTP
# status and clients branch on it without reading the English `reason`.
RejectionCode = Literal[
    "conflict",              # expected_seq is stale
    "wrong_tenant",          # the session belongs to another tenant
    "deleted",               # the session is deleted
    "already_exists",        # create_session for a session that exists
    "already_ended",         # cancel of an ended session
    "not_awaiting_approval", # approve/deny of a call that does not wait for one
    "not_pending",           # a person's tool result for a call that is not pending
    "unknown_session",       # a command for a session that was never created
    "malformed",             # the record did not decode as an input
    "too_large",             # the input's event would exceed max_record_bytes
    "internal_error",        # handling the input raised: the session's input is parked here
]
REJECTION_CODES: tuple[str, ...] = RejectionCode.__args__  # type: ignore[attr-defined]
MARKER_TYPES = frozenset(
    {"turn_started", "turn_ended", "woke", "title_generated", "file_reference", "message_queued"}
)


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SessionConfig(Frozen):
    """Bound once by `session_created`; immutable for the session's lifetime."""

    system_prompt: str = "You are a careful agent. Use the tools to do the task, then report."
    tools: tuple[str, ...] = ("bash", "read_file", "write_file", "list_files")
    model: str = "scripted:default"
    max_turns: int = Field(default=20, ge=1, le=10_000)
    # Bounded so a request can never carry a number no model or column can take.
    max_tokens: int = Field(default=4096, ge=1, le=1_000_000)
    context_window: int = Field(default=200_000, ge=1024, le=100_000_000)
    tool_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    require_approval: tuple[str, ...] = ()


class Usage(Frozen):
    input_tokens: int = 0
    output_tokens: int = 0


class SessionCreatedPayload(Frozen):
    config: SessionConfig
    owner: str
    title: str | None = None
    parent_session_id: str | None = None
    fork_seq: int | None = None


class UserMessagePayload(Frozen):
    text: str
    queued: bool = False


class MessageQueuedPayload(Frozen):
    """A message that arrived during a running turn; a `user_message` takes it when the turn ends."""

    command_id: str
    text: str


class TurnPayload(Frozen):
    turn: int


class ModelTurnPayload(Frozen):
    text: str = ""
    reasoning: tuple[str, ...] = ()
    usage: Usage = Usage()
    stop_reason: str = "end_turn"
    tool_call_ids: tuple[str, ...] = ()


class ToolCallPayload(Frozen):
    tool_call_id: str
    name: str
    input: dict[str, Any]


class ApprovalPayload(Frozen):
    tool_call_id: str
    reason: str | None = None


class ToolResultPayload(Frozen):
    tool_call_id: str
    name: str
    output: str
    is_error: bool = False
    error_kind: str | None = None
    duration_ms: int | None = None


class CompactionPayload(Frozen):
    summary: str
    covered_from_seq: int
    covered_to_seq: int
    tokens_before: int
    tokens_after: int


class TurnEndedPayload(Frozen):
    turn: int
    stop_reason: str = "end_turn"


class SessionEndedPayload(Frozen):
    reason: EndReason
    detail: str | None = None


class WokePayload(Frozen):
    host: str
    reason: str
    from_seq: int


class HandsPayload(Frozen):
    by: str


class TitlePayload(Frozen):
    title: str


class FileReferencePayload(Frozen):
    path: str
    tool_call_id: str | None = None


class InputRejectedPayload(Frozen):
    command_id: str
    reason: str
    expected_seq: int | None = None
    # Absent on events recorded before codes existed; left out of the dump when None so
    # those events keep the canonical JSON (and hash) they were sealed with.
    code: RejectionCode | None = Field(default=None, exclude_if=lambda v: v is None)


class DeletedPayload(Frozen):
    by: str
    reason: str | None = None


class EventBase(Frozen):
    session_id: str = Field(min_length=1, max_length=200)
    seq: int = Field(ge=1)
    event_id: str
    causation_id: str | None = None
    tenant: str = Field(min_length=1, max_length=200)
    actor: str = Field(min_length=1, max_length=210)
    trust: Trust
    ts: datetime
    prev_hash: str
    hash: str


class SessionCreated(EventBase):
    type: Literal["session_created"] = "session_created"
    payload: SessionCreatedPayload


class UserMessage(EventBase):
    type: Literal["user_message"] = "user_message"
    payload: UserMessagePayload


class MessageQueued(EventBase):
    type: Literal["message_queued"] = "message_queued"
    payload: MessageQueuedPayload


class TurnStarted(EventBase):
    type: Literal["turn_started"] = "turn_started"
    payload: TurnPayload


class ModelTurn(EventBase):
    type: Literal["model_turn"] = "model_turn"
    payload: ModelTurnPayload


class ToolCall(EventBase):
    type: Literal["tool_call"] = "tool_call"
    payload: ToolCallPayload


class ApprovalRequested(EventBase):
    type: Literal["approval_requested"] = "approval_requested"
    payload: ApprovalPayload


class ApprovalGranted(EventBase):
    type: Literal["approval_granted"] = "approval_granted"
    payload: ApprovalPayload


class ApprovalDenied(EventBase):
    type: Literal["approval_denied"] = "approval_denied"
    payload: ApprovalPayload


class ToolResult(EventBase):
    type: Literal["tool_result"] = "tool_result"
    payload: ToolResultPayload


class Compaction(EventBase):
    type: Literal["compaction"] = "compaction"
    payload: CompactionPayload


class TurnEnded(EventBase):
    type: Literal["turn_ended"] = "turn_ended"
    payload: TurnEndedPayload


class SessionEnded(EventBase):
    type: Literal["session_ended"] = "session_ended"
    payload: SessionEndedPayload


class Woke(EventBase):
    type: Literal["woke"] = "woke"
    payload: WokePayload


class Takeover(EventBase):
    type: Literal["takeover"] = "takeover"
    payload: HandsPayload


class Handback(EventBase):
    type: Literal["handback"] = "handback"
    payload: HandsPayload


class TitleGenerated(EventBase):
    type: Literal["title_generated"] = "title_generated"
    payload: TitlePayload


class FileReference(EventBase):
    type: Literal["file_reference"] = "file_reference"
    payload: FileReferencePayload


class InputRejected(EventBase):
    type: Literal["input_rejected"] = "input_rejected"
    payload: InputRejectedPayload


class Deleted(EventBase):
    type: Literal["deleted"] = "deleted"
    payload: DeletedPayload



EVENT_CLASSES: dict[str, type[EventBase]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        SessionCreated, UserMessage, MessageQueued, TurnStarted, ModelTurn, ToolCall, ApprovalRequested,
        ApprovalGranted, ApprovalDenied, ToolResult, Compaction, TurnEnded, SessionEnded,
        Woke, Takeover, Handback, TitleGenerated, FileReference, InputRejected, Deleted,
    )
}
PAYLOAD_CLASSES: dict[str, type[Frozen]] = {
    name: cls.model_fields["payload"].annotation for name, cls in EVENT_CLASSES.items()
}

Event = Annotated[Union[tuple(EVENT_CLASSES.values())], Field(discriminator="type")]  # type: ignore[valid-type]
_EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)


def parse_event(data: dict[str, Any] | str | bytes) -> EventBase:
    """Decodes one event from a dict or JSON; raises `pydantic.ValidationError` if malformed."""
    if isinstance(data, (str, bytes)):
        return _EVENT_ADAPTER.validate_json(data)
    return _EVENT_ADAPTER.validate_python(data)


def is_marker(event: EventBase) -> bool:
    """Bookkeeping events the transcript skips; nothing may treat them as a reply."""
    return event.type in MARKER_TYPES  # type: ignore[attr-defined]
