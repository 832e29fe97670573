"""The session log's event types: frozen pydantic models, one per `type`, one union.

Only the shapes live here. Sequencing and hashing are in `chain.py`; what the events
mean for a session's state is in `fold.py`. Events are past tense and never change once
sealed: `seq`, `prev_hash` and `hash` are assigned by the brain, the only writer.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, field_validator, model_validator

from wakeline.contract.declared_tools import MAX_DECLARED_BYTES, MAX_DECLARED_TOOLS, ToolDefinition, declared_size

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
    "not_pending",           # a tool result from the hands (a person or a service) for a call that is not pending
    "unknown_session",       # a command for a session that was never created
    "malformed",             # the record did not decode as an input
    "too_large",             # the input's event would exceed max_record_bytes
    "internal_error",        # handling the input raised: the session's input is parked here
]
REJECTION_CODES: tuple[str, ...] = get_args(RejectionCode)
MARKER_TYPES = frozenset(
    {"turn_started", "turn_ended", "woke", "title_generated", "file_reference", "message_queued", "snapshot"}
)


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _tool_kind(value: Any) -> str:
    return "builtin" if isinstance(value, str) else "declared"


# A built-in tool by name (run by our runners), or a tool the session declares for its own
# harness. Tagged, so a bad definition is reported as one, not also as "not a string".
ToolEntry = Annotated[Union[Annotated[str, Tag("builtin")], Annotated[ToolDefinition, Tag("declared")]],
                      Discriminator(_tool_kind)]
BUILTIN_TOOL_NAMES = frozenset({"bash", "read_file", "write_file", "list_files"})  # wakeline.contract.tools.TOOLS


class SessionConfig(Frozen):
    """Bound once by `session_created`; immutable for the session's lifetime."""

    system_prompt: str = "You are a careful agent. Use the tools to do the task, then report."
    tools: tuple[ToolEntry, ...] = ("bash", "read_file", "write_file", "list_files")
    model: str = "scripted:default"
    max_turns: int = Field(default=20, ge=1, le=10_000)
    # Bounded so a request can never carry a number no model or column can take.
    max_tokens: int = Field(default=4096, ge=1, le=1_000_000)
    context_window: int = Field(default=200_000, ge=1024, le=100_000_000)
    tool_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    require_approval: tuple[str, ...] = ()
    # Extended thinking (Claude): the model may think this many tokens before it answers;
    # None is off. Left out of the dump when None so configs sealed before it keep their
    # canonical JSON (and hash). The API wants 1024 <= budget < max_tokens.
    thinking_budget: int | None = Field(default=None, ge=1024, le=1_000_000, exclude_if=lambda v: v is None)
    # The session's memory file (issue 11): a file in the sandbox's work dir, relative to it,
    # that each compaction re-reads and re-injects whole after its summary. None: no memory
    # file; left out of the dump then, so configs sealed before it keep their hash.
    memory_file: str | None = Field(default=None, min_length=1, max_length=255, exclude_if=lambda v: v is None)
    # How long a declared tool's call waits for the harness before the model gets an error
    # result saying no harness answered; None (left out of the dump): as long as the session lives.
    client_tool_timeout_s: float | None = Field(default=None, gt=0, le=30 * 86400, exclude_if=lambda v: v is None)

    @model_validator(mode="after")
    def _budget_below_max_tokens(self) -> "SessionConfig":
        if self.thinking_budget is not None and self.thinking_budget >= self.max_tokens:
            raise ValueError(f"thinking_budget ({self.thinking_budget}) must be below max_tokens ({self.max_tokens})")
        return self

    @model_validator(mode="after")
    def _declared_tools_bounded(self) -> "SessionConfig":
        declared = self.declared_tools()
        if len(declared) > MAX_DECLARED_TOOLS:
            raise ValueError(f"at most {MAX_DECLARED_TOOLS} declared tools, got {len(declared)}")
        seen: set[str] = set()
        for tool in declared.values():
            if tool.name in BUILTIN_TOOL_NAMES:
                raise ValueError(f"tool {tool.name!r}: the name is a built-in tool's; declare it under another name")
        for name in self.tool_names():
            if name in seen:
                raise ValueError(f"tool {name!r} is listed twice")
            seen.add(name)
        size = declared_size([t.api_shape() for t in declared.values()])
        if size > MAX_DECLARED_BYTES:
            raise ValueError(f"declared tools take {size} bytes as JSON; at most {MAX_DECLARED_BYTES}")
        return self

    def builtin_tools(self) -> tuple[str, ...]:
        """The built-in tools' names, in the order listed: these calls go to the runners."""
        return tuple(t for t in self.tools if isinstance(t, str))

    def declared_tools(self) -> dict[str, ToolDefinition]:
        """The tools the session's own harness answers, by name, in the order declared."""
        return {t.name: t for t in self.tools if isinstance(t, ToolDefinition)}

    def tool_names(self) -> tuple[str, ...]:
        return tuple(t if isinstance(t, str) else t.name for t in self.tools)

    @field_validator("memory_file")
    @classmethod
    def _memory_file_inside_work_dir(cls, value: str | None) -> str | None:
        """A relative path that stays in the work dir: the runner confines it anyway, but a
        config that names a file it can never read is refused when the session is created."""
        if value is None:
            return None
        if value.startswith("/") or "\\" in value or "\0" in value:
            raise ValueError("memory_file must be a relative path inside the work dir (no leading /, no \\, no NUL)")
        parts = value.split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise ValueError("memory_file must name a file inside the work dir: no '..', '.' or empty path parts")
        return value


def _zero(value: int) -> bool:
    return value == 0


class Usage(Frozen):
    input_tokens: int = 0
    output_tokens: int = 0
    # Prompt caching (Claude): tokens written to and read from the prefix cache, besides
    # `input_tokens` (which counts only what was neither). Left out of the dump when 0 so
    # usage sealed before they existed keeps its canonical JSON (and hash).
    cache_creation_input_tokens: int = Field(default=0, exclude_if=_zero)
    cache_read_input_tokens: int = Field(default=0, exclude_if=_zero)

    # What the API bills for cached input, as a share of the base input price: a cache
    # read costs a tenth, a cache write (5-minute) a quarter more.
    CACHE_READ_PRICE: ClassVar[float] = 0.1
    CACHE_WRITE_PRICE: ClassVar[float] = 1.25

    def cache_hit_rate(self) -> float:
        """The share of all input tokens that were read from the prefix cache (for /cost)."""
        total = self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
        return self.cache_read_input_tokens / total if total else 0.0

    def cache_saved_input_tokens(self) -> float:
        """What caching saved, in input tokens at the base price: reads at a tenth instead of
        full price, less the extra quarter paid on writes (negative when writes were not read)."""
        return (self.cache_read_input_tokens * (1 - self.CACHE_READ_PRICE)
                - self.cache_creation_input_tokens * (self.CACHE_WRITE_PRICE - 1))

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(input_tokens=self.input_tokens + other.input_tokens,
                     output_tokens=self.output_tokens + other.output_tokens,
                     cache_creation_input_tokens=self.cache_creation_input_tokens + other.cache_creation_input_tokens,
                     cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens)


class SessionCreatedPayload(Frozen):
    config: SessionConfig
    owner: str
    title: str | None = None
    parent_session_id: str | None = None
    fork_seq: int | None = None


class ForkedPayload(Frozen):
    """Opens a fork: its history is the parent's events 1..`fork_seq`, read from the parent
    (never copied); this event sits at `fork_seq + 1` and links to `parent_hash`, the
    parent's hash at `fork_seq`, so the fork's chain continues the parent's."""

    parent_session_id: str
    fork_seq: int = Field(ge=1)
    parent_hash: str
    config: SessionConfig
    owner: str
    title: str | None = None


class UserMessagePayload(Frozen):
    text: str
    queued: bool = False


class MessageQueuedPayload(Frozen):
    """A message that arrived during a running turn; a `user_message` takes it when the turn ends."""

    command_id: str
    text: str


class TurnStartedPayload(Frozen):
    turn: int


class ModelTurnPayload(Frozen):
    text: str = ""
    reasoning: tuple[str, ...] = ()
    usage: Usage = Usage()
    stop_reason: str = "end_turn"
    tool_call_ids: tuple[str, ...] = ()
    # Every content block of the reply exactly as the API returned it (thinking with its
    # signature, redacted_thinking, text, tool_use), in order: the next request must send
    # them back unchanged. Empty on turns recorded before it existed (and for models that
    # return none): the fold then rebuilds the message from `text` and the tool calls.
    blocks: tuple[dict[str, Any], ...] = Field(default=(), exclude_if=lambda v: not v)


def reasoning_of(turn: ModelTurnPayload) -> tuple[str, ...]:
    """A turn's reasoning for people to read: from its thinking blocks where it has them
    (redacted thinking as a marker; signatures are for the API only), else `reasoning`."""
    if not turn.blocks:
        return turn.reasoning
    return tuple(str(b.get("thinking", "")) if b.get("type") == "thinking" else "[redacted thinking]"
                 for b in turn.blocks if b.get("type") in ("thinking", "redacted_thinking"))


AnsweredBy = Literal["client"]


class ToolCallPayload(Frozen):
    tool_call_id: str
    name: str
    input: dict[str, Any]
    # "client": a declared tool's call, answered by the session's own harness and never sent
    # to the runners. None (left out of the dump, so calls sealed before it keep their
    # hash): a built-in tool's, for the runners or whoever holds the hands.
    answered_by: AnsweredBy | None = Field(default=None, exclude_if=lambda v: v is None)


class _ApprovalFields(Frozen):
    tool_call_id: str
    reason: str | None = None


# One payload class per event type, so a draft's type follows from its payload and a
# payload cannot be sealed under another type. Siblings with equal fields serialise
# identically: the wire and the hashes are what they were with one shared class.
class ApprovalRequestedPayload(_ApprovalFields):
    pass


class ApprovalGrantedPayload(_ApprovalFields):
    pass


class ApprovalDeniedPayload(_ApprovalFields):
    pass


class ToolResultPayload(Frozen):
    tool_call_id: str
    name: str
    output: str
    is_error: bool = False
    error_kind: str | None = None
    duration_ms: int | None = None
    # Copied from the call it answers ("client" for a declared tool's), so the sessions
    # projection can count the calls still waiting for the harness from the events alone.
    answered_by: AnsweredBy | None = Field(default=None, exclude_if=lambda v: v is None)


TokenSource = Literal["estimate", "count_tokens"]


class CompactionPayload(Frozen):
    summary: str
    covered_from_seq: int
    covered_to_seq: int
    tokens_before: int
    tokens_after: int
    # A summary the model wrote (issue 11): which model, and what that call used. Absent, and
    # left out of the dump, on mechanical compactions and on every event before them, so
    # those keep the canonical JSON (and hash) they were sealed with.
    summary_model: str | None = Field(default=None, exclude_if=lambda v: v is None)
    usage: Usage | None = Field(default=None, exclude_if=lambda v: v is None)
    # The summary replaces the prefix the model's prompt cache holds: the next request
    # pays a cold prefill. False (and left out of the dump) on compactions recorded before.
    resets_prompt_cache: bool = Field(default=False, exclude_if=lambda v: not v)
    # The session's memory file, re-read for this compaction and re-injected whole after the
    # summary (issue 11): its path, and its content (None when the read failed: the file is
    # missing, say). Both absent, and left out of the dump, where the config names none.
    memory_file: str | None = Field(default=None, exclude_if=lambda v: v is None)
    memory: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # Where `tokens_before` and `tokens_after` come from (issues 11, 15): the model's own
    # count (`count_tokens`, Claude's API) or the local estimate (characters / 4: what the
    # scripted model keeps, and what stands when a count fails). A counted `tokens_before`
    # is what decided the compaction, so the replay check re-plans with it. "estimate" is
    # left out of the dump: events sealed before these fields keep their hash.
    tokens_before_source: TokenSource = Field(default="estimate", exclude_if=lambda v: v == "estimate")
    tokens_after_source: TokenSource = Field(default="estimate", exclude_if=lambda v: v == "estimate")


class ModelUnavailablePayload(Frozen):
    """The model call failed after the adapter's retries (overload, rate limit, a cut
    connection): the turn is parked `waiting_model`, not ended. The brain calls again after
    `retry_in_s`, on a wake, or when the session is woken by a new input."""

    error: str
    attempt: int = Field(ge=1)  # consecutive failures of this turn's model call
    retry_in_s: float = Field(ge=0)


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


class _HandsFields(Frozen):
    by: str


class TakeoverPayload(_HandsFields):
    pass


class HandbackPayload(_HandsFields):
    pass


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


class SnapshotPayload(Frozen):
    """The fold of every event before this one, as `wakeline.log.state_json` renders it, and its
    hash: a wake may start from it instead of the first event. Verify checks it against the
    fold of its prefix (`wakeline.log.snapshots`)."""

    state: dict[str, Any]
    state_hash: str
    format: str  # `state_json.STATE_FORMAT` of the code that wrote it


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


# Class names are past tense (facts); the wire `type` strings are what they have always
# been, since stored events keep theirs and their hashes cover them.
class SessionCreated(EventBase):
    type: Literal["session_created"] = "session_created"
    payload: SessionCreatedPayload


class SessionForked(EventBase):
    type: Literal["forked"] = "forked"
    payload: ForkedPayload


class UserMessageReceived(EventBase):
    type: Literal["user_message"] = "user_message"
    payload: UserMessagePayload


class MessageQueued(EventBase):
    type: Literal["message_queued"] = "message_queued"
    payload: MessageQueuedPayload


class TurnStarted(EventBase):
    type: Literal["turn_started"] = "turn_started"
    payload: TurnStartedPayload


class ModelResponded(EventBase):
    type: Literal["model_turn"] = "model_turn"
    payload: ModelTurnPayload


class ToolCallRequested(EventBase):
    type: Literal["tool_call"] = "tool_call"
    payload: ToolCallPayload


class ApprovalRequested(EventBase):
    type: Literal["approval_requested"] = "approval_requested"
    payload: ApprovalRequestedPayload


class ApprovalGranted(EventBase):
    type: Literal["approval_granted"] = "approval_granted"
    payload: ApprovalGrantedPayload


class ApprovalDenied(EventBase):
    type: Literal["approval_denied"] = "approval_denied"
    payload: ApprovalDeniedPayload


class ToolResultReceived(EventBase):
    type: Literal["tool_result"] = "tool_result"
    payload: ToolResultPayload


class ContextCompacted(EventBase):
    type: Literal["compaction"] = "compaction"
    payload: CompactionPayload


class ModelUnavailable(EventBase):
    type: Literal["model_unavailable"] = "model_unavailable"
    payload: ModelUnavailablePayload


class TurnEnded(EventBase):
    type: Literal["turn_ended"] = "turn_ended"
    payload: TurnEndedPayload


class SessionEnded(EventBase):
    type: Literal["session_ended"] = "session_ended"
    payload: SessionEndedPayload


class Woke(EventBase):
    type: Literal["woke"] = "woke"
    payload: WokePayload


class HandsTakenOver(EventBase):
    type: Literal["takeover"] = "takeover"
    payload: TakeoverPayload


class HandsHandedBack(EventBase):
    type: Literal["handback"] = "handback"
    payload: HandbackPayload


class TitleGenerated(EventBase):
    type: Literal["title_generated"] = "title_generated"
    payload: TitlePayload


class FileReferenced(EventBase):
    type: Literal["file_reference"] = "file_reference"
    payload: FileReferencePayload


class InputRejected(EventBase):
    type: Literal["input_rejected"] = "input_rejected"
    payload: InputRejectedPayload


class SessionDeleted(EventBase):
    type: Literal["deleted"] = "deleted"
    payload: DeletedPayload


class SnapshotTaken(EventBase):
    type: Literal["snapshot"] = "snapshot"
    payload: SnapshotPayload


# Written out (not built from a tuple) so a type checker sees every member: `event.type`
# and `event.payload` are then typed, and `match` on the classes narrows them.
Event = Annotated[
    Union[SessionCreated, UserMessageReceived, MessageQueued, TurnStarted, ModelResponded,
          ToolCallRequested, ApprovalRequested, ApprovalGranted, ApprovalDenied, ToolResultReceived,
          ContextCompacted, TurnEnded, SessionEnded, Woke, HandsTakenOver, HandsHandedBack,
          TitleGenerated, FileReferenced, InputRejected, SessionDeleted, SnapshotTaken, SessionForked,
          ModelUnavailable],
    Field(discriminator="type"),
]
Payload = Union[SessionCreatedPayload, UserMessagePayload, MessageQueuedPayload, TurnStartedPayload,
                ModelTurnPayload, ToolCallPayload, ApprovalRequestedPayload, ApprovalGrantedPayload,
                ApprovalDeniedPayload, ToolResultPayload, CompactionPayload, TurnEndedPayload,
                SessionEndedPayload, WokePayload, TakeoverPayload, HandbackPayload, TitlePayload,
                FileReferencePayload, InputRejectedPayload, DeletedPayload, SnapshotPayload, ForkedPayload,
                ModelUnavailablePayload]
EventType = Literal["session_created", "user_message", "message_queued", "turn_started", "model_turn",
                    "tool_call", "approval_requested", "approval_granted", "approval_denied",
                    "tool_result", "compaction", "turn_ended", "session_ended", "woke", "takeover",
                    "handback", "title_generated", "file_reference", "input_rejected", "deleted",
                    "snapshot", "forked", "model_unavailable"]

EVENT_CLASSES: dict[str, type[EventBase]] = {
    cls.model_fields["type"].default: cls for cls in get_args(get_args(Event)[0])
}
PAYLOAD_CLASSES: dict[str, type[Frozen]] = {
    name: cls.model_fields["payload"].annotation for name, cls in EVENT_CLASSES.items()  # type: ignore[misc]
}
# The other way: a payload's class names its event's type (one class per type, above).
EVENT_TYPE_OF_PAYLOAD: dict[type[Frozen], str] = {cls: name for name, cls in PAYLOAD_CLASSES.items()}
_EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


class CorruptEvent(ValueError):
    """Bytes or a row that are not a valid event: the log holds something no brain sealed."""

    def __init__(self, reason: str, seq: int | None = None):
        where = f"event at seq {seq}" if seq is not None else "event"
        super().__init__(f"{where} is not a valid event: {reason}")
        self.seq = seq
        self.reason = reason


def parse_event(data: dict[str, Any] | str | bytes) -> Event:
    """Decodes one event from a dict or JSON; raises `pydantic.ValidationError` if malformed."""
    if isinstance(data, (str, bytes)):
        return _EVENT_ADAPTER.validate_json(data)
    return _EVENT_ADAPTER.validate_python(data)


def is_marker(event: Event) -> bool:
    """Bookkeeping events the transcript skips; nothing may treat them as a reply."""
    return event.type in MARKER_TYPES
