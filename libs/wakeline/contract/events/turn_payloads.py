"""The payloads of what happens in a turn: the user's message, the model's reply or its
failure, tool calls, approvals and results, compactions, and the turn's own markers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from wakeline.contract.events.frozen import Frozen
from wakeline.contract.events.usage import Usage


class UserMessagePayload(Frozen):
    text: str
    queued: bool = False


class MessageQueuedPayload(Frozen):
    """A message that arrived during a running turn; a `user_message` takes it when the turn ends."""

    command_id: str
    text: str


class TurnStartedPayload(Frozen):
    turn: int


class TurnQueuedPayload(Frozen):
    """The turn waits for one of its tenant's running-session slots (issue 34): the tenant had
    `running` sessions in a turn against its quota of `limit`. The session is `queued` until a
    slot is granted to it, in arrival order across the tenant's sessions, and then records
    `turn_started` as any turn does. What Postgres answered the brain, like a model reply: the
    replay check takes it as recorded."""

    turn: int  # the turn that waits
    running: int = Field(ge=0)
    limit: int = Field(ge=1)


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
