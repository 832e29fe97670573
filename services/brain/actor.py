"""`SessionActor`: one session's loop inside the brain that owns its partition, its mailbox
and its lifecycle.

Inputs for one session are handled in order; different sessions run concurrently, so a
slow model call on one never delays another. The actor holds state only as a cache: it
wakes by folding the log (`log_reads`), appends through its `SessionLog`, and exits when
idle (eviction) or when its partition is revoked. An input's offset is released only once
the session is waiting for someone else again, so a crash mid-turn redelivers it and the
next owner resumes the turn. What an item appends is the `Sequencer`'s to write, the model
calls are the `ModelDriver`'s, and a declared tool's wait for its harness is timed by
`ClientCallTimers`.

Failure stays with the session: an input whose handling raises is dead-lettered, what
the session records about it comes from `parking.park_drafts`, and its offset is
released at once, so it is never retried forever and never stops another session. A log
that cannot be folded (`SessionUnwakeable`) refuses the session's inputs the same way; a
database or broker that is restarting is waited out.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from wakeline.agent.inputs import handle_input
from wakeline.agent.parking import park_drafts
from wakeline.agent.steps import client_timeout_drafts, next_step
from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.contract.limits import RecordTooLarge
from wakeline.log.chain import Draft
from wakeline.log.state import SessionState
from wakeline.runtime import logs, metrics, tracing
from wakeline_brain.actor_deps import ActorDeps
from wakeline_brain.compaction_counts import CompactionCounts
from wakeline_brain.log_reads import SessionUnwakeable, open_fork, read_session
from wakeline_brain.metrics import WAKE_SECONDS
from wakeline_brain.mail import ClientTimeout, MalformedInput, ModelDone, RetryModel, SummaryDone, Token, Uncounted
from wakeline_brain.model_driver import ModelDriver
from wakeline_brain.quota_admission import refused
from wakeline_brain.sequencer import Sequencer
from wakeline_brain.session_log import SessionLog
from wakeline_brain.tool_calls import ClientCallTimers
from wakeline_brain.turn_gate import TurnGate
from wakeline_brain.writer import PartitionWriter, WriterClosed

log = logging.getLogger(__name__)


@dataclass
class SessionActor:
    session_id: str
    tenant: str
    partition: int
    writer: PartitionWriter
    deps: ActorDeps
    mailbox: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    _held: list[Token] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Its pieces, one job each; they read the tenant and deps through the actor (`ActorView`).
        self.compaction_counts = CompactionCounts(self)
        self.client_timers = ClientCallTimers(self)
        self.session_log = SessionLog(self, on_sealed=self.compaction_counts.note, on_written=self.client_timers.time)
        self.model_driver = ModelDriver(self, self.compaction_counts)
        self.turn_gate = TurnGate(self)
        self.sequencer = Sequencer(self.session_log, self.model_driver, self.compaction_counts, self.turn_gate)

    @property
    def state(self) -> SessionState:
        """The session as its committed log folds."""
        return self.session_log.state

    async def run(self, why: str) -> None:
        logs.bind(session_id=self.session_id)  # this task's lines, and its model calls'
        try:
            try:
                with metrics.Stopwatch() as woke:
                    await self._wake(why)
                WAKE_SECONDS.observe(woke.seconds)
                logs.bind(seq=self.state.last_seq)
                log.info("woke session %s at seq %d in %.3f s (%s)", self.session_id, self.state.last_seq,
                         woke.seconds, why)
            except SessionUnwakeable as err:
                log.error("session %s cannot be woken: %s", self.session_id, err)
                await self._refuse_mailbox(f"the session cannot be woken: {err}")
                return
            await self._guarded(None)
            while True:
                # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel (the partition
                # revoked) that meets a get completing at the same moment, and the revoke waited forever.
                try:
                    async with asyncio.timeout(self.deps.idle_evict_s):
                        item = await self.mailbox.get()
                except TimeoutError:
                    # A call on a timer keeps the session here: evicted, nothing would end its wait.
                    if self._quiet() and self.mailbox.empty() and not self.client_timers:
                        await self.session_log.snapshot_on_evict()
                        return  # idle eviction: the log keeps everything
                    continue
                await self._guarded(item)
        finally:
            self.model_driver.stop()
            self.client_timers.cancel()

    async def _wake(self, why: str) -> None:
        state, events = await read_session(self)
        self.session_log.woke(state, events)
        for event in events:
            self.compaction_counts.note(event)
        self.tenant = self.state.tenant or self.tenant  # the log's owner, not the input's claim
        if self.state.last_seq:
            woke = e.WokePayload(host=self.deps.host, reason=why, from_seq=self.state.last_seq)
            await self.session_log.append([Draft(payload=woke, actor="system:brain", trust="instruction")])

    async def _guarded(self, item: Any) -> None:
        """Handles one mailbox item (None: just advance); a failure parks it, never the brain."""
        uncounted = isinstance(item, tuple) and isinstance(item[0], Uncounted)
        if uncounted:
            item = (item[0].command, item[1])
        payload = item[0] if isinstance(item, tuple) else item  # (input, token), or the model's answer
        logs.bind(seq=self.state.last_seq, tool_call_id=getattr(payload, "tool_call_id", None))
        # The input's trace goes on here, and on in what this task writes from now on (wakeline.runtime.tracing).
        span = tracing.follow(item[1], f"brain {type(payload).__name__}", **{"wakeline.session_id": self.session_id}) \
            if isinstance(item, tuple) else None
        try:
            drafts, token = await self._handle(item, uncounted) if item is not None else ([], None)
            await self.sequencer.advance(drafts)
            if token is not None:
                self._held.append(token)
            self._release_if_quiet()
        except (WriterClosed, asyncio.CancelledError):
            raise
        except Exception as err:
            code: e.RejectionCode = "too_large" if isinstance(err, RecordTooLarge) else "internal_error"
            if code == "internal_error":
                log.exception("session %s: handling an input failed; parking it", self.session_id)
            await self._park(item, code, f"{type(err).__name__}: {err}" if code == "internal_error" else str(err))
        finally:
            if span is not None:
                span.end()

    async def _handle(self, item: Any, uncounted: bool = False) -> tuple[list[Draft], Token | None]:
        """The drafts a mailbox item makes, and its input's token (held once they are written).
        `uncounted`: a command from a Kafka client, counted against its tenant's quotas first."""
        if isinstance(item, (ModelDone, SummaryDone, RetryModel)):
            return self.model_driver.settle(item, self.state), None
        if isinstance(item, ClientTimeout):
            self.client_timers.expired(item.tool_call_id)
            return client_timeout_drafts(self.state, item.tool_call_id), None
        payload, token = item
        if uncounted and (refusal := await refused(self.deps, self.state, payload)) is not None:
            return refusal, token
        if isinstance(payload, c.WakeSession):
            self.model_driver.call_now()
        if isinstance(payload, MalformedInput):
            return self._reject_malformed(payload), token
        if self.state.status == "new" and isinstance(payload, c.CreateSession) and payload.fork_of is not None:
            return await self._fork(payload), token
        if self.state.status == "new" and not isinstance(payload, (c.CreateSession, c.ToolResultReport)):
            await self.deps.dead_letter(payload, f"unknown_session: unknown session {self.session_id}")
            return [], token
        return handle_input(self.state, payload, self.deps.prices), token

    async def _fork(self, cmd: c.CreateSession) -> list[Draft]:
        """The fork's first events, sealed after its parent's prefix: the state becomes the
        prefix's fold. A fork that cannot start was dead-lettered: nothing to seal."""
        opened = await open_fork(self, cmd)
        if opened is None:
            return []
        self.session_log.state, self.tenant = opened[0], cmd.tenant
        return opened[1]

    def _reject_malformed(self, bad: MalformedInput) -> list[Draft]:
        if self.state.status != "new" and not self.state.has_seen(bad.command_id):
            rejected = e.InputRejectedPayload(command_id=bad.command_id, code=bad.code, reason=bad.reason)
            return [Draft(payload=rejected, actor="system:brain", trust="instruction", causation_id=bad.command_id)]
        return []

    async def _park(self, item: Any, code: e.RejectionCode, reason: str) -> None:
        payload, token = item if isinstance(item, tuple) else (None, None)
        if self.state.session_id and self.state.session_id != self.session_id:
            # a fork whose first events failed: its parent's prefix is not its log
            self.session_log.state = SessionState()

        if payload is not None and not isinstance(payload, MalformedInput):
            await self.deps.dead_letter(payload, f"{code}: {reason}")
        drafts = park_drafts(self.state, payload, code, reason)
        if payload is not None and code == "internal_error":
            drafts += park_drafts(self.state, None, code, reason)  # a bug mid-turn: stop, never repeat
        before = self.state
        try:
            await self.session_log.append(drafts)
        finally:
            if token is not None:
                self.deps.release([token])  # dead-lettered and recorded: never handled again
        await self.turn_gate.settle(before, self.state)  # a turn the failure ended gives its slot back
        self._release_if_quiet()

    async def _refuse_mailbox(self, reason: str) -> None:
        while not self.mailbox.empty():
            item = self.mailbox.get_nowait()
            if isinstance(item, tuple):
                payload, token = item
                payload = payload.command if isinstance(payload, Uncounted) else payload
                if not isinstance(payload, MalformedInput):
                    await self.deps.dead_letter(payload, f"internal_error: {reason}")
                self.deps.release([token])

    def _release_if_quiet(self) -> None:
        if self._quiet():
            self.deps.release(self._held)
            self._held = []
            if not self.state.in_turn:
                self.compaction_counts.forget()  # waiting for an input: no request is near

    def _quiet(self) -> bool:
        return self.model_driver.task is None and next_step(self.state) is None

    @property
    def quiet(self) -> bool:
        """Idle: woken, no model call running and no step to take (read by a metric)."""
        return self.state.last_seq > 0 and self._quiet()

    def held_tokens(self) -> list[Token]:
        return list(self._held)
