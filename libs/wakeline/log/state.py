"""The value `fold` derives from a session's events: frozen, comparable, no I/O.

`Message` and its blocks mirror the Messages API's shapes, so the brain can build a
request from them directly; tool output is held as a `ToolResultBlock` tagged `data`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from wakeline.contract.budget import Budget
from wakeline.log.digests import Digests
from wakeline.contract.events import GENESIS_HASH, EndReason, SessionConfig, ToolCallPayload, Usage
from wakeline.log.spending import Spend
from wakeline.log.status import Status


def command_digest(command_id: str) -> int:
    """The 64-bit digest a session remembers a command by (`SessionState.seen_commands`).

    Eight bytes a command instead of the id (36-69 characters), so a snapshot holding every
    command a session has seen stays small. Equal ids give equal digests, so a command seen
    is always recognised; a *new* id refused because its digest equals an earlier one's needs
    a 64-bit collision (about n / 2**64 for a session of n commands)."""
    return int.from_bytes(hashlib.blake2b(command_id.encode(), digest_size=8).digest(), "big")


@dataclass(frozen=True)
class TextBlock:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True)
class ToolUseBlock:
    id: str
    name: str
    input: Any
    type: Literal["tool_use"] = "tool_use"


@dataclass(frozen=True)
class ToolResultBlock:
    tool_use_id: str
    content: str
    is_error: bool = False
    trust: Literal["data"] = "data"
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True)
class ThinkingBlock:
    """Extended thinking as the model returned it; `signature` lets the API check that it
    comes back unchanged, which it must before that turn's tool results."""

    thinking: str
    signature: str
    type: Literal["thinking"] = "thinking"


@dataclass(frozen=True)
class RedactedThinkingBlock:
    """Thinking the API returned encrypted: kept and sent back as it came."""

    data: str
    type: Literal["redacted_thinking"] = "redacted_thinking"


@dataclass(frozen=True)
class OtherBlock:
    """A block of a kind the brain does not act on (a server tool's use or result, say), or a
    text block with more than its text (its `citations`), kept as the API returned it so the
    next request sends it back whole."""

    raw: dict[str, Any]
    type: Literal["other"] = "other"


def text_of(block: "Block") -> str | None:
    """The text of a text block, a plain one or one kept whole (`OtherBlock`); None for
    other blocks. For readers of the conversation (summaries), not for requests."""
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, OtherBlock) and block.raw.get("type") == "text":
        return str(block.raw.get("text", ""))
    return None


Block = Union[TextBlock, ThinkingBlock, RedactedThinkingBlock, ToolUseBlock, ToolResultBlock, OtherBlock]


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant"]
    blocks: tuple[Block, ...]
    seq: int  # the seq of the event that opened this message; compaction cuts by it


@dataclass(frozen=True)
class MemoryRead:
    """The result of the brain's own read of the session's memory file, waiting for the
    compaction it was read for (`SessionState.memory_read`)."""

    output: str
    is_error: bool


@dataclass(frozen=True)
class QueuedMessage:
    command_id: str
    text: str
    actor: str


@dataclass(frozen=True)
class SessionState:
    session_id: str = ""
    tenant: str = ""
    owner: str = ""
    config: SessionConfig = field(default_factory=SessionConfig)
    title: str | None = None
    parent_session_id: str | None = None
    fork_seq: int | None = None
    status: Status = "new"
    last_seq: int = 0
    last_hash: str = GENESIS_HASH
    turns: int = 0
    in_turn: bool = False
    # The next turn waits for one of the tenant's running-session slots (`turn_queued`, issue
    # 34): the session is `queued` and takes no step of its own until the slot is granted.
    awaiting_slot: bool = False
    awaiting_model: bool = False  # a turn started and its model call has not been recorded yet
    # The turn's model call failed after the adapter's retries (`model_unavailable`): the
    # session is parked `waiting_model`, and this many calls of the turn have failed.
    model_failures: int = 0
    stop_reason: str | None = None  # the newest model turn's (end_turn, tool_use, max_tokens, refusal, ...)
    messages: tuple[Message, ...] = ()
    pending_tool_calls: tuple[ToolCallPayload, ...] = ()
    awaiting_approval: frozenset[str] = frozenset()
    queued: tuple[QueuedMessage, ...] = ()
    # Every command id the log records as a causation (`command_digest`), so a command is
    # never applied twice, however long ago it was. Tool results are not here: a result is
    # recorded only for a pending call, and recording it resolves the call (docs/architecture.md,
    # "What a session remembers of its inputs").
    seen_commands: Digests = field(default_factory=Digests)
    ended_reason: EndReason | None = None
    hands: str | None = None  # who took over (human:<principal> or service:<principal>), or None for the runners
    compactions: int = 0
    # A compaction with nothing said since (no message, model turn, tool call or result):
    # the next model call goes with what it left rather than compact again. In the log,
    # not the brain's memory, so a woken brain knows it too.
    fresh_compaction: bool = False
    # The brain's own read of the memory file before a compaction (issue 11): the call's id
    # while it is pending, then its result until the compaction (or the model's reply, or
    # the turn's end) uses it up. Never a message: the model did not ask for it.
    memory_call: str | None = None
    memory_read: MemoryRead | None = None
    usage: Usage = field(default_factory=Usage)
    # The budget in force (the config's, then each `budget_changed`'s) and what the session's
    # own model calls spent against it, at the prices its log bound (`wakeline.log.spending`).
    budget: Budget | None = None
    spend: Spend = field(default_factory=Spend)
    files: tuple[str, ...] = ()
    deleted_by: str | None = None

    def has_seen(self, command_id: str) -> bool:
        """Whether a command with this id is already in the log (it caused an event)."""
        return command_digest(command_id) in self.seen_commands


def from_fields(fields: dict[str, object]) -> SessionState:
    """The state whose fields are `fields`, every one of them (the fold's `freeze`, which owns
    the dict it hands over): `evolve` without copying them all a second time (issue 35)."""
    new = object.__new__(SessionState)
    object.__setattr__(new, "__dict__", fields)
    return new


def evolve(state: SessionState, **changes: object) -> SessionState:
    """`dataclasses.replace` for the fold's hot path: the same result without re-running
    field introspection and `__init__` for every event (15x cheaper, measured)."""
    new = object.__new__(SessionState)
    fields = dict(state.__dict__)
    fields.update(changes)
    object.__setattr__(new, "__dict__", fields)
    return new
