"""One class per event type: the fields every event carries (`EventBase`), each `type` bound
to its payload, and `Event`, the union that decodes any of them by its `type`.

Class names are facts in the past tense; the `type` strings on the wire are the ones sealed
events have always had. Markers are the types the transcript skips.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, Union, get_args

from pydantic import Field

from wakeline.contract.events.frozen import Frozen
from wakeline.contract.events.session_payloads import (
    BudgetChangedPayload, DeletedPayload, FileReferencePayload, ForkedPayload, HandbackPayload, InputRejectedPayload,
    SessionCreatedPayload, SessionEndedPayload, SnapshotPayload, TakeoverPayload, TitlePayload, WokePayload,
)
from wakeline.contract.events.turn_payloads import (
    ApprovalDeniedPayload, ApprovalGrantedPayload, ApprovalRequestedPayload, CompactionPayload,
    MessageQueuedPayload, ModelTurnPayload, ModelUnavailablePayload, ToolCallPayload, ToolResultPayload,
    TurnEndedPayload, TurnQueuedPayload, TurnStartedPayload, UserMessagePayload,
)

GENESIS_HASH = "0" * 64

Trust = Literal["instruction", "data"]
MARKER_TYPES = frozenset(
    {"turn_started", "turn_queued", "turn_ended", "woke", "title_generated", "file_reference", "message_queued",
     "snapshot"}
)


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


class TurnQueued(EventBase):
    type: Literal["turn_queued"] = "turn_queued"
    payload: TurnQueuedPayload


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


class BudgetChanged(EventBase):
    type: Literal["budget_changed"] = "budget_changed"
    payload: BudgetChangedPayload


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
          ModelUnavailable, BudgetChanged, TurnQueued],
    Field(discriminator="type"),
]
Payload = Union[SessionCreatedPayload, UserMessagePayload, MessageQueuedPayload, TurnStartedPayload,
                ModelTurnPayload, ToolCallPayload, ApprovalRequestedPayload, ApprovalGrantedPayload,
                ApprovalDeniedPayload, ToolResultPayload, CompactionPayload, TurnEndedPayload,
                SessionEndedPayload, WokePayload, TakeoverPayload, HandbackPayload, TitlePayload,
                FileReferencePayload, InputRejectedPayload, DeletedPayload, SnapshotPayload, ForkedPayload,
                ModelUnavailablePayload, BudgetChangedPayload, TurnQueuedPayload]
EventType = Literal["session_created", "user_message", "message_queued", "turn_started", "model_turn",
                    "tool_call", "approval_requested", "approval_granted", "approval_denied",
                    "tool_result", "compaction", "turn_ended", "session_ended", "woke", "takeover",
                    "handback", "title_generated", "file_reference", "input_rejected", "deleted",
                    "snapshot", "forked", "model_unavailable", "budget_changed", "turn_queued"]

EVENT_CLASSES: dict[str, type[EventBase]] = {
    cls.model_fields["type"].default: cls for cls in get_args(get_args(Event)[0])
}
PAYLOAD_CLASSES: dict[str, type[Frozen]] = {
    name: cls.model_fields["payload"].annotation for name, cls in EVENT_CLASSES.items()  # type: ignore[misc]
}
# The other way: a payload's class names its event's type (one class per type, above).
EVENT_TYPE_OF_PAYLOAD: dict[type[Frozen], str] = {cls: name for name, cls in PAYLOAD_CLASSES.items()}


def is_marker(event: Event) -> bool:
    """Bookkeeping events the transcript skips; nothing may treat them as a reply."""
    return event.type in MARKER_TYPES
