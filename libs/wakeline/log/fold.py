"""`fold(events) -> SessionState`: the only way a session's state comes to exist.

Pure: no clock, no randomness, no I/O; the same events give the same state on every host
and every replay. Markers (turn boundaries, woke, titles, file references, queueing,
snapshots) may update bookkeeping but never the conversation. What to *do* given a state
lives in the brain, not here; how the model's conversation is put together is conversation.py.

Folding n events is O(n): the events go into a private `_Building` whose growing parts
(messages, seen commands, files, ...) are lists and sets changed in place, and the state is
frozen once at the end. Copying the growing tuples per event made a 10k-event fold
quadratic. `apply` is the same code for one event.
"""

from __future__ import annotations

from typing import Iterable

from wakeline.contract.commands import result_input_id
from wakeline.contract.events import (
    ApprovalDenied, ApprovalGranted, ApprovalRequested, BudgetChanged, ContextCompacted, Event, FileReferenced,
    ForkedPayload, HandsHandedBack, HandsTakenOver, InputRejected, MessageQueued, ModelResponded, ModelUnavailable,
    SessionCreated, SessionDeleted, SessionEnded, SessionForked, SnapshotTaken, TitleGenerated, ToolCallPayload,
    ToolCallRequested, ToolResultReceived, TurnEnded, TurnQueued, TurnStarted, UserMessageReceived, Woke,
)
from wakeline.log.conversation import add_tool_result, add_tool_use, compacted, turn_blocks
from wakeline.log.spending import after
from wakeline.log.state import (
    MemoryRead, Message, QueuedMessage, SessionState, TextBlock, ToolResultBlock, ToolUseBlock, command_digest,
    from_fields,
)
from wakeline.log.status import STATUS_MOVES, StatusMove, session_status


BRAIN = "system:brain"
# What opens a session's budget and spend, or moves them (`wakeline.log.spending.after`).
_METERED = frozenset({"session_created", "forked", "model_turn", "compaction", "budget_changed"})


class FoldError(ValueError):
    """The events do not form a session: out of order, or foreign to it."""


def fold(events: Iterable[Event], state: SessionState | None = None) -> SessionState:
    building = _Building(state or SessionState())
    for event in events:
        building.apply(event)
    return building.freeze()


def apply(state: SessionState, event: Event) -> SessionState:
    building = _Building(state)
    building.apply(event)
    return building.freeze()


def _runner_result(e: Event) -> bool:
    """A runner's result, caused by `result:<tool_call_id>`: no command, so nothing to remember.
    Its duplicates are refused because the call is no longer pending (`SessionState.seen_commands`)."""
    return isinstance(e, ToolResultReceived) and e.causation_id == result_input_id(e.payload.tool_call_id)


class _Building:
    """A state being folded. Scalars live in `f` (the state's fields); each growing part is
    copied from the start state the first time an event changes it, then changed in place."""

    def __init__(self, state: SessionState):
        self.start = state
        self.f = dict(state.__dict__)
        self.messages: list[Message] | None = None
        self.pending: list[ToolCallPayload] | None = None
        self.queued: list[QueuedMessage] | None = None
        self.files: list[str] | None = None
        self.approval: set[str] | None = None
        self.seen: set[int] = set()  # added to the start's seen_commands at freeze: one copy, not n

    def apply(self, e: Event) -> None:
        f = self.f
        if e.seq != f["last_seq"] + 1:
            raise FoldError(f"expected seq {f['last_seq'] + 1}, got {e.seq}")
        # A fork's first event follows its parent's prefix: from there on the state is the fork's.
        if f["session_id"] and e.session_id != f["session_id"] and not isinstance(e, SessionForked):
            raise FoldError(f"event of {e.session_id} folded into {f['session_id']}")
        self._applied(e)
        if e.type in _METERED:  # the fork's own budget and spend: the prefix's calls are the parent's
            f["budget"], f["spend"] = after(f["budget"], f["spend"], e)
        move = STATUS_MOVES.get(e.type)
        if move is not None:
            self._status_moved(e, move)
        if e.causation_id and not _runner_result(e):
            self.seen.add(command_digest(e.causation_id))
        f["last_seq"], f["last_hash"] = e.seq, e.hash

    def freeze(self) -> SessionState:
        f = self.f
        for name, part in (("messages", self.messages), ("pending_tool_calls", self.pending),
                           ("queued", self.queued), ("files", self.files)):
            if part is not None:
                f[name] = tuple(part)
        if self.approval is not None:
            f["awaiting_approval"] = frozenset(self.approval)
        if self.seen:
            f["seen_commands"] = f["seen_commands"].with_added(self.seen)
        f["status"] = session_status(deleted=f["deleted_by"] is not None, ended=f["ended_reason"] is not None,
                                     in_turn=f["in_turn"], created=bool(f["session_id"]),
                                     waiting_model=f["model_failures"] > 0,
                                     waiting_client=any(c.answered_by == "client" for c in f["pending_tool_calls"]),
                                     queued=f["awaiting_slot"])
        return from_fields(f)  # f began as a copy of the start's fields: every field is in it

    def _messages(self) -> list[Message]:
        if self.messages is None:
            self.messages = list(self.start.messages)
        return self.messages

    def _pending(self) -> list[ToolCallPayload]:
        if self.pending is None:
            self.pending = list(self.start.pending_tool_calls)
        return self.pending

    def _approval(self) -> set[str]:
        if self.approval is None:
            self.approval = set(self.start.awaiting_approval)
        return self.approval

    def _applied(self, e: Event) -> None:
        f = self.f
        match e:
            case SessionCreated(payload=p):
                f.update(session_id=e.session_id, tenant=e.tenant, owner=p.owner, config=p.config,
                         title=p.title, parent_session_id=p.parent_session_id, fork_seq=p.fork_seq)
            case SessionForked(payload=p):
                self._forked(e, p)
            case UserMessageReceived(payload=p):
                self._messages().append(Message("user", (TextBlock(p.text),), e.seq))
                f["fresh_compaction"] = False
                if self.queued is None:
                    self.queued = list(self.start.queued)
                if self.queued:
                    self.queued = [q for q in self.queued if q.command_id != e.causation_id]
                # A message to a finished session continues it (STATUS_MOVES): the turn budget carries over.
            case MessageQueued(payload=p):
                if self.queued is None:
                    self.queued = list(self.start.queued)
                self.queued.append(QueuedMessage(p.command_id, p.text, e.actor))
            case ModelResponded(payload=p):
                f["usage"] = f["usage"] + p.usage
                self._messages().append(Message("assistant", turn_blocks(p), e.seq))
                # `pause_turn`: the API stopped a long turn to be resumed by sending it back.
                f.update(awaiting_model=p.stop_reason == "pause_turn", stop_reason=p.stop_reason,
                         memory_read=None, fresh_compaction=False)
            case ModelUnavailable(payload=p):
                f["model_failures"] = p.attempt
            case ToolCallRequested(payload=p) if e.actor == BRAIN:
                # The brain's own read of the memory file: run like any call, never shown to
                # the model as its tool_use (it would have no tool_result pair in its turn).
                self._pending().append(p)
                f.update(memory_call=p.tool_call_id, memory_read=None)
            case ToolCallRequested(payload=p):
                add_tool_use(self._messages(), ToolUseBlock(p.tool_call_id, p.name, p.input), e.seq)
                self._pending().append(p)
                f["fresh_compaction"] = False
            case ToolResultReceived(payload=p) if p.tool_call_id == f["memory_call"]:
                self.pending = [c for c in self._pending() if c.tool_call_id != p.tool_call_id]
                f.update(memory_call=None, memory_read=MemoryRead(p.output, p.is_error))
            case ToolResultReceived(payload=p):
                self._tool_result(e.seq, p.tool_call_id, ToolResultBlock(p.tool_call_id, p.output, p.is_error))
                f["fresh_compaction"] = False
            case ContextCompacted(payload=p):
                self.messages = compacted(self._messages(), p, e.seq)
                f["compactions"] += 1
                f.update(memory_read=None, fresh_compaction=True)
            case TurnStarted():
                # a read of the memory file is for its own turn's compaction, never a later one's
                f.update(turns=f["turns"] + 1, awaiting_model=True, memory_read=None)
            case TurnEnded():
                f.update(awaiting_model=False, memory_read=None)
            case ApprovalRequested(payload=p):
                self._approval().add(p.tool_call_id)
            case ApprovalGranted(payload=p) | ApprovalDenied(payload=p):
                self._approval().discard(p.tool_call_id)
            case SessionEnded():
                f.update(awaiting_model=False, memory_read=None)
                # The end stops the wait for the harness (a cancel, say): its calls are no longer
                # offered, and a result posted for one now is refused. Runner calls stay as they were.
                if any(c.answered_by == "client" for c in self._pending()):
                    self.pending = [c for c in self._pending() if c.answered_by != "client"]
            case HandsTakenOver(payload=p):
                f["hands"] = p.by
            case HandsHandedBack():
                f["hands"] = None
            case TitleGenerated(payload=p):
                f["title"] = p.title
            case FileReferenced(payload=p):
                if self.files is None:
                    self.files = list(self.start.files)
                self.files.append(p.path)
            case SessionDeleted():
                f["awaiting_model"] = False
            case Woke() | InputRejected() | SnapshotTaken() | BudgetChanged() | TurnQueued():
                pass  # bookkeeping: in the log, nothing to the conversation (a budget is metered in `apply`)
            case _:
                raise FoldError(f"no fold for event type {e.type!r}")  # unreachable while Event is closed

    def _status_moved(self, e: Event, move: StatusMove) -> None:
        """The status flags as `STATUS_MOVES` says, the table `advance` reads too. Waiting for
        the model is `model_failures > 0`: an unavailable model sets the attempt (above)."""
        f = self.f
        if move.in_turn is not None:
            f["in_turn"] = move.in_turn
        if move.waiting_model is False:
            f["model_failures"] = 0
        if move.queued is not None:
            f["awaiting_slot"] = move.queued
        if move.ends:
            f["ended_reason"] = e.payload.reason  # type: ignore[union-attr]
        if move.continues:
            f["ended_reason"] = None
        if move.deletes:
            f["deleted_by"] = e.payload.by  # type: ignore[union-attr]

    def _forked(self, e: SessionForked, p: ForkedPayload) -> None:
        """The conversation is the prefix's; what was in flight there (a turn, queued
        messages, someone's hands, an end) and what it spent belong to the parent, not to the fork."""
        self.f.update(session_id=e.session_id, tenant=e.tenant, owner=p.owner, config=p.config, title=p.title,
                      parent_session_id=p.parent_session_id, fork_seq=p.fork_seq, in_turn=False, awaiting_slot=False,
                      awaiting_model=False, ended_reason=None, hands=None, deleted_by=None, memory_call=None,
                      memory_read=None)
        self.queued, self.pending, self.approval = [], [], set()

    def _tool_result(self, seq: int, call_id: str, block: ToolResultBlock) -> None:
        pending = self._pending()
        if any(c.tool_call_id == call_id for c in pending):
            self.pending = [c for c in pending if c.tool_call_id != call_id]
        add_tool_result(self._messages(), block, seq)
        if call_id in self.start.awaiting_approval or self.approval:
            self._approval().discard(call_id)
