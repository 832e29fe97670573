"""The session log's event types: frozen pydantic models, one per `type`, one union.

Only the shapes live here. Sequencing and hashing are in `wakeline.log.chain`; what the
events mean for a session's state is in `wakeline.log.fold`. Events are past tense and never
change once sealed: `seq`, `prev_hash` and `hash` are assigned by the brain, the only writer.

Every name is importable from here (`from wakeline.contract.events import ToolCallRequested`,
`events.parse_event`); each lives in the module named for what it holds: `frozen` (the base
model), `config` (`SessionConfig`), `usage`, `turn_payloads` and `session_payloads` (each
type's payload), `event_types` (the event classes, the `Event` union, the markers) and
`decoding` (`parse_event`, `CorruptEvent`). A budget's and a price's shapes are the
contract's own (`wakeline.contract.budget`, `wakeline.contract.prices`): events carry them.
"""

from __future__ import annotations

from wakeline.contract.events.frozen import Frozen
from wakeline.contract.events.config import BUILTIN_TOOL_NAMES, SessionConfig, ToolEntry
from wakeline.contract.events.usage import Usage
from wakeline.contract.events.turn_payloads import (
    AnsweredBy, ApprovalDeniedPayload, ApprovalGrantedPayload, ApprovalRequestedPayload, CompactionPayload,
    MessageQueuedPayload, ModelTurnPayload, ModelUnavailablePayload, TokenSource, ToolCallPayload,
    ToolResultPayload, TurnEndedPayload, TurnQueuedPayload, TurnStartedPayload, UserMessagePayload, reasoning_of,
)
from wakeline.contract.events.session_payloads import (
    BudgetChangedPayload, DeletedPayload, EndReason, FileReferencePayload, ForkedPayload, HandbackPayload,
    InputRejectedPayload, REJECTION_CODES, RejectionCode, SessionCreatedPayload, SessionEndedPayload, SnapshotPayload,
    TakeoverPayload, TitlePayload, WokePayload,
)
from wakeline.contract.events.event_types import (
    ApprovalDenied, ApprovalGranted, ApprovalRequested, BudgetChanged, ContextCompacted, EVENT_CLASSES,
    EVENT_TYPE_OF_PAYLOAD, Event, EventBase, EventType, FileReferenced, GENESIS_HASH, HandsHandedBack,
    HandsTakenOver, InputRejected, MARKER_TYPES, MessageQueued, ModelResponded, ModelUnavailable,
    PAYLOAD_CLASSES, Payload, SessionCreated, SessionDeleted, SessionEnded, SessionForked, SnapshotTaken,
    TitleGenerated, ToolCallRequested, ToolResultReceived, Trust, TurnEnded, TurnQueued, TurnStarted,
    UserMessageReceived, Woke, is_marker,
)
from wakeline.contract.events.decoding import CorruptEvent, parse_event

__all__ = [
    "AnsweredBy", "ApprovalDenied", "ApprovalDeniedPayload", "ApprovalGranted", "ApprovalGrantedPayload",
    "ApprovalRequested", "ApprovalRequestedPayload", "BUILTIN_TOOL_NAMES", "BudgetChanged", "BudgetChangedPayload",
    "CompactionPayload",
    "ContextCompacted", "CorruptEvent", "DeletedPayload", "EVENT_CLASSES", "EVENT_TYPE_OF_PAYLOAD",
    "EndReason", "Event", "EventBase", "EventType", "FileReferencePayload", "FileReferenced",
    "ForkedPayload", "Frozen", "GENESIS_HASH", "HandbackPayload", "HandsHandedBack", "HandsTakenOver",
    "InputRejected", "InputRejectedPayload", "MARKER_TYPES", "MessageQueued", "MessageQueuedPayload",
    "ModelResponded", "ModelTurnPayload", "ModelUnavailable", "ModelUnavailablePayload", "PAYLOAD_CLASSES",
    "Payload", "REJECTION_CODES", "RejectionCode", "SessionConfig", "SessionCreated",
    "SessionCreatedPayload", "SessionDeleted", "SessionEnded", "SessionEndedPayload", "SessionForked",
    "SnapshotPayload", "SnapshotTaken", "TakeoverPayload", "TitleGenerated", "TitlePayload", "TokenSource",
    "ToolCallPayload", "ToolCallRequested", "ToolEntry", "ToolResultPayload", "ToolResultReceived", "Trust",
    "TurnEnded", "TurnEndedPayload", "TurnQueued", "TurnQueuedPayload",
    "TurnStarted", "TurnStartedPayload", "Usage", "UserMessagePayload",
    "UserMessageReceived", "Woke", "WokePayload", "is_marker", "parse_event", "reasoning_of",
]
