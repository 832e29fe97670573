"""`SessionActor`: one session's loop inside the brain that owns its partition.

Inputs for one session are handled in order; different sessions run concurrently, so a
slow model call on one never delays another. The actor holds state only as a cache: it
wakes by folding the log, appends by sealing drafts at the next seq and waiting for the
partition's transaction to commit, and exits when idle (eviction) or when its partition
is revoked. An input's offset is released only once the session is waiting for someone
else again, so a crash mid-turn redelivers it and the next owner resumes the turn.

Failure stays with the session: an input whose handling raises is dead-lettered, what
the session records about it comes from `parking.park_drafts`, and its offset is
released at once, so it is never retried forever and never stops another session. A log
that cannot be folded (`SessionUnwakeable`) refuses the session's inputs the same way; a
database or broker that is restarting is waited out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.runtime import logs, metrics, tracing
from wakeline.log.chain import Draft, seal
from wakeline.contract.codec import encode
from wakeline.contract.deltas import DeltaKind, ModelDelta
from wakeline.log.fold import FoldError, apply, fold
from wakeline.storage.lineage import PrefixUnavailable
from wakeline.contract.limits import RecordTooLarge, check_record
from wakeline.log.snapshots import resume, snapshot_payload
from wakeline.log.state import SessionState
from wakeline.contract.topics import EVENTS, TOOL_CALLS, record_key
from wakeline.agent.context import (
    TokenCount, build_request, counted_after, estimate_tokens, estimated, plan_compaction, usage_reading,
)
from wakeline.agent.forking import ForkRefused, fork_drafts
from wakeline.agent.inputs import handle_input
from wakeline.agent.memory import compaction_step
from wakeline.agent.model import Model, ModelError, ModelReply, ModelRequest
from wakeline.agent.parking import park_drafts
from wakeline.agent.steps import CALL_MODEL, client_timeout_drafts, failed_model_drafts, model_drafts, next_step
from wakeline.agent.summary import just_compacted, model_compaction, summary_request, writes_summary
from wakeline_brain.wake import is_transient
from wakeline_brain.writer import PartitionWriter, Record, WriterClosed

log = logging.getLogger(__name__)
_NO_LIMIT = contextlib.nullcontext()
# At most this many model replies sealed into one transaction by `_advance` (a model that
# always answers within the linger would otherwise never let the transaction go).
_MAX_INLINE_REPLIES = 8
Token = Any  # opaque to the actor: handed back to `release` when the input is settled


@dataclass
class ActorDeps:
    host: str
    idle_evict_s: float
    load: Callable[[str, str, int, bool], Awaitable[list[e.Event]]]  # (session, tenant, partition, whole)
    model_for: Callable[[str], Model]
    tools: list[dict[str, Any]]
    release: Callable[[list[Token]], None]
    dead_letter: Callable[[Any, str], Awaitable[None]]
    now: Callable[[], Any]
    new_id: Callable[[], str]
    max_record_bytes: int = 1_000_000
    # A snapshot event every this many events, and on eviction once this many came since
    # the last: a wake then folds at most about this many, not the whole log.
    snapshot_every: int = 1000
    snapshot_on_evict_after: int = 100
    # (parent, tenant, upto) -> the parent's history a fork inherits; None: this brain forks nothing.
    load_prefix: Callable[[str, str, int], Awaitable[list[e.Event]]] | None = None
    # At most this many model calls at once across the brain's sessions (None: no bound):
    # a burst of sessions queues here instead of piling onto an overloaded API.
    model_slots: asyncio.Semaphore | None = None
    # A turn whose model call failed with a passing cause (overload, rate limit) waits
    # `model_retry_s * 2**(attempt-1)`, at most `model_retry_max_s`, then calls again.
    model_retry_s: float = 2.0
    model_retry_max_s: float = 60.0
    # Live text of replies being written: to viewers (the model-deltas topic), never the log.
    publish_delta: Callable[[ModelDelta], Awaitable[None]] | None = None
    # How long `_advance` waits for a model call it started before writing what came
    # before it: a reply within it rides in the same transaction (BrainSettings.model_linger_ms).
    model_linger_s: float = 0.0


class SessionUnwakeable(RuntimeError):
    """The session's log cannot be read or folded (e.g. retention dropped its start)."""


@dataclass
class _ModelDone:
    turn: int
    reply: ModelReply | None
    error: str | None = None
    retryable: bool = False  # the cause passes: park the turn `waiting_model`, do not end it
    compaction: Draft | None = None  # the model's token count says: compact first, then call


@dataclass(frozen=True)
class _RetryModel:
    """The backoff after a `model_unavailable` is over: call the model again."""


@dataclass(frozen=True)
class _ClientTimeout:
    """A declared tool's call waited `client_tool_timeout_s` for the harness."""

    tool_call_id: str


@dataclass
class _SummaryDone:
    """A planned compaction, with the model's summary (or the mechanical one where that
    call failed) and, where the model counts tokens, its count of what is left."""

    turn: int
    seq: int
    compaction: Draft


@dataclass
class SessionActor:
    session_id: str
    tenant: str
    partition: int
    writer: PartitionWriter
    deps: ActorDeps
    mailbox: asyncio.Queue = field(default_factory=asyncio.Queue)
    state: SessionState = field(default_factory=SessionState)
    _held: list[Token] = field(default_factory=list)
    _issued: set[str] = field(default_factory=set)
    _model_task: asyncio.Task | None = None
    _snapshot_seq: int = 0  # the newest snapshot's seq, or where one was too large to write
    _snapshot_refused: bool = False
    # While a parked turn waits out its backoff no model call starts (a wake starts over
    # without one: a new owner calls at once).
    _retry_task: asyncio.Task | None = None
    # The compaction the model's count asked for, handed from `_model_answer` to `_advance`.
    _counted_plan: Draft | None = None
    # (seq, tokens) of the newest model turn since the last compaction: its recorded usage
    # (input, cache, output), a count of the request it answered that costs no call.
    _last_turn: tuple[int, int] | None = None
    # The count a planned compaction was decided by, for its record once the memory file's
    # read is in (a wake counts again).
    _planned_count: TokenCount | None = None
    # A timer per declared tool's call waiting for the harness, where the config sets
    # `client_tool_timeout_s`; started when the call is written (or the session woken).
    _client_timers: dict[str, asyncio.Task] = field(default_factory=dict)

    async def run(self, why: str) -> None:
        logs.bind(session_id=self.session_id)  # this task's lines, and its model calls'
        try:
            try:
                with metrics.Stopwatch() as woke:
                    await self._wake(why)
                metrics.WAKE_SECONDS.observe(woke.seconds)
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
                    if self._quiet() and self.mailbox.empty() and not self._client_timers:
                        await self._snapshot_on_evict()
                        return  # idle eviction: the log keeps everything
                    continue
                await self._guarded(item)
        finally:
            if self._model_task:
                self._model_task.cancel()
            if self._retry_task:
                self._retry_task.cancel()
            for timer in self._client_timers.values():
                timer.cancel()

    async def _wake(self, why: str) -> None:
        events = await self._load()
        try:
            self.state = await self._fold(events)
        except SessionUnwakeable as err:
            if not (events and isinstance(events[0], e.SnapshotTaken)):
                raise
            # A snapshot is a shortcut, never the only way in: one that will not resume
            # (unreadable state, a wrong seq) costs a full read, not the session.
            log.warning("waking %s: %s; folding its whole log instead", self.session_id, err)
            events = await self._load(whole=True)
            self.state = await self._fold(events)
        self._snapshot_seq = max((ev.seq for ev in events if isinstance(ev, e.SnapshotTaken)), default=0)
        for event in events:
            self._note_tokens(event)
        self.tenant = self.state.tenant or self.tenant  # the log's owner, not the input's claim
        if self.state.last_seq:
            woke = e.WokePayload(host=self.deps.host, reason=why, from_seq=self.state.last_seq)
            await self._append([Draft(payload=woke, actor="system:brain", trust="instruction")])

    async def _load(self, whole: bool = False) -> list[e.Event]:
        delay = 0.2
        while True:
            try:
                return await self.deps.load(self.session_id, self.tenant, self.partition, whole)
            except Exception as err:
                if not is_transient(err):
                    raise SessionUnwakeable(f"its log cannot be read: {type(err).__name__}: {err}") from err
                log.warning("waking %s: %r; retrying in %.1f s", self.session_id, err, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _fold(self, events: list[e.Event]) -> SessionState:
        try:
            return resume(events)
        except (ValueError, KeyError, TypeError) as err:  # FoldError; a snapshot state that will not parse
            raise SessionUnwakeable(f"its log does not fold: {err}") from err

    async def _guarded(self, item: Any) -> None:
        """Handles one mailbox item (None: just advance); a failure parks it, never the brain."""
        payload = item[0] if isinstance(item, tuple) else item  # (input, token), or the model's answer
        logs.bind(seq=self.state.last_seq, tool_call_id=getattr(payload, "tool_call_id", None))
        # The input's trace goes on here, and on in what this task writes from now on (wakeline.runtime.tracing).
        span = tracing.follow(item[1], f"brain {type(payload).__name__}", **{"wakeline.session_id": self.session_id}) \
            if isinstance(item, tuple) else None
        try:
            drafts, token = await self._handle(item) if item is not None else ([], None)
            await self._advance(drafts)
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

    async def _park(self, item: Any, code: e.RejectionCode, reason: str) -> None:
        payload, token = item if isinstance(item, tuple) else (None, None)
        if self.state.session_id and self.state.session_id != self.session_id:
            self.state = SessionState()  # a fork whose first events failed: its parent's prefix is not its log

        if payload is not None and not isinstance(payload, MalformedInput):
            await self.deps.dead_letter(payload, f"{code}: {reason}")
        drafts = park_drafts(self.state, payload, code, reason)
        if payload is not None and code == "internal_error":
            drafts += park_drafts(self.state, None, code, reason)  # a bug mid-turn: stop, never repeat
        try:
            await self._append(drafts)
        finally:
            if token is not None:
                self.deps.release([token])  # dead-lettered and recorded: never handled again
        self._release_if_quiet()

    async def _refuse_mailbox(self, reason: str) -> None:
        while not self.mailbox.empty():
            item = self.mailbox.get_nowait()
            if isinstance(item, tuple):
                payload, token = item
                if not isinstance(payload, MalformedInput):
                    await self.deps.dead_letter(payload, f"internal_error: {reason}")
                self.deps.release([token])

    async def _handle(self, item: Any) -> tuple[list[Draft], Token | None]:
        """The drafts a mailbox item makes, and its input's token (held once they are written)."""
        if isinstance(item, _SummaryDone):
            self._model_task = None
            if self.state.awaiting_model and self.state.turns == item.turn and self.state.last_seq == item.seq:
                return [item.compaction], None
            return [], None
        if isinstance(item, _ModelDone):
            self._model_task = None
            if not (self.state.awaiting_model and self.state.turns == item.turn):
                return [], None
            if item.compaction is not None:
                self._counted_plan = item.compaction  # `_advance` starts it, as any compaction
                return [], None
            if item.reply:
                return model_drafts(self.state, item.reply, f"agent:{self.state.config.model}"), None
            if item.retryable:
                return [self._model_unavailable(item.error or "model unavailable")], None
            return failed_model_drafts(item.error or "model failed"), None
        if isinstance(item, _RetryModel):
            self._retry_task = None
            return [], None  # `_advance` then finds the call due and makes it
        if isinstance(item, _ClientTimeout):
            self._client_timers.pop(item.tool_call_id, None)
            return client_timeout_drafts(self.state, item.tool_call_id), None
        payload, token = item
        if isinstance(payload, c.WakeSession) and self._retry_task is not None:
            self._retry_task.cancel()  # a wake asks for the model now, not after the backoff
            self._retry_task = None
        if isinstance(payload, MalformedInput):
            return self._reject_malformed(payload), token
        if self.state.status == "new" and isinstance(payload, c.CreateSession) and payload.fork_of is not None:
            return await self._fork(payload), token
        if self.state.status == "new" and not isinstance(payload, (c.CreateSession, c.ToolResultReport)):
            await self.deps.dead_letter(payload, f"unknown_session: unknown session {self.session_id}")
            return [], token
        return handle_input(self.state, payload), token

    async def _fork(self, cmd: c.CreateSession) -> list[Draft]:
        """The fork's first events, sealed after its parent's prefix: `self.state` becomes the
        prefix's fold, so the `forked` event takes seq N + 1 and links to the parent's hash
        at N. A fork that cannot start is dead-lettered with its reason; nothing is sealed."""
        assert cmd.fork_of is not None
        origin = cmd.fork_of
        try:
            if self.deps.load_prefix is None:
                raise ForkRefused("this brain was started without a prefix reader")
            prefix = await self._retried(lambda: self.deps.load_prefix(origin.session_id, cmd.tenant, origin.seq))
            state = fold(prefix)
            drafts = fork_drafts(state, prefix, cmd)
        except (PrefixUnavailable, FoldError, ForkRefused) as err:
            log.warning("session %s: fork of %s at %d refused: %s", self.session_id, origin.session_id,
                        origin.seq, err)
            await self.deps.dead_letter(cmd, f"fork_refused: {err}")
            return []
        self.state, self.tenant = state, cmd.tenant
        return drafts

    async def _retried(self, read: Callable[[], Awaitable[Any]]) -> Any:
        delay = 0.2
        while True:
            try:
                return await read()
            except Exception as err:
                if not is_transient(err):
                    raise
                log.warning("session %s: %r; retrying in %.1f s", self.session_id, err, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _model_unavailable(self, error: str) -> Draft:
        """Parks the turn `waiting_model` and starts the backoff after which it calls again."""
        attempt = self.state.model_failures + 1
        wait = min(self.deps.model_retry_s * 2 ** min(attempt - 1, 20), self.deps.model_retry_max_s)
        log.warning("session %s: the model is unavailable (attempt %d), calling again in %.1f s: %s",
                    self.session_id, attempt, wait, error)

        async def later() -> None:
            await asyncio.sleep(wait)
            await self.mailbox.put(_RetryModel())
        self._retry_task = asyncio.create_task(later())
        payload = e.ModelUnavailablePayload(error=error[:2000], attempt=attempt, retry_in_s=wait)
        return Draft(payload=payload, actor="system:brain", trust="instruction")

    def _reject_malformed(self, bad: "MalformedInput") -> list[Draft]:
        if self.state.status != "new" and not self.state.has_seen(bad.command_id):
            rejected = e.InputRejectedPayload(command_id=bad.command_id, code=bad.code, reason=bad.reason)
            return [Draft(payload=rejected, actor="system:brain", trust="instruction", causation_id=bad.command_id)]
        return []

    async def _advance(self, drafts: list[Draft]) -> None:
        """Appends `drafts` and every step the session then takes on its own (`next_step`:
        turn markers, queued messages, the end) in one transaction, then starts the model
        call the steps stop at. One transaction where there were up to four: a tool result,
        its turn's end and the next turn's start go out together, which is what keeps the
        brain's Kafka requests, and its CPU, per tool round trip down (issue 10). The log is
        the same events in the same order; a crash loses the whole batch or nothing.

        The model call starts from the sealed state, before that transaction commits, and
        a reply that comes within `model_linger_s` is sealed into the same transaction
        (with the tool calls it makes): a fast model's step costs one transaction, not a
        second one right behind the first, which the coordinator refuses until the first's
        markers are written. A slower reply comes through the mailbox as before. Starting
        early changes nothing a crash can show: the transaction holds the input's events
        and the reply or neither, and an input whose events are not committed is read
        again and answered again."""
        state, events = self._sealed(drafts, self.state)
        answered: asyncio.Task[_ModelDone] | None = None
        task: asyncio.Task[None] | None = None
        try:
            inline = 0
            while True:
                state, events, calls_model, summarize = self._steps(state, events)
                answered = asyncio.create_task(self._model_answer(state)) if calls_model else None
                if answered is None or inline == _MAX_INLINE_REPLIES:
                    break
                done = await self._within_linger(answered)
                if done is None or done.reply is None or done.compaction is not None:
                    break  # slow, failed or compacting first: through the mailbox, as it always was
                inline += 1
                state, more = self._sealed(model_drafts(state, done.reply, f"agent:{state.config.model}"), state)
                events += more
            if answered is not None:
                task = asyncio.create_task(self._forward(answered))
            elif summarize is not None:
                task = asyncio.create_task(self._summarize(*summarize))
            await self._write(events, state)
        except BaseException:
            for started in (task, answered):
                if started is not None:
                    started.cancel()  # what it would answer was never committed
            raise
        if task is not None:
            self._model_task = task

    def _steps(self, state: SessionState, events: list[e.Event]
               ) -> tuple[SessionState, list[e.Event], bool, tuple[SessionState, Draft] | None]:
        """The steps from `state` up to the next model call: (state, events so far, whether
        the model is to be called now, the compaction its summary call is for)."""
        calls_model, summarize = False, None
        while True:
            step = next_step(state)
            if step is CALL_MODEL:
                calls_model = self._model_task is None and self._retry_task is None
                # A compaction comes before the request it shortens; once recorded, that
                # request is sent (never a second compaction in a row).
                compaction = None
                if calls_model and not just_compacted(state):
                    compaction = self._planned_compaction(state)
                if compaction is not None:
                    # first the memory file's read (a tool call), then, on its result, this again
                    compaction = compaction_step(state, compaction)
                if compaction is not None and isinstance(compaction.payload, e.ToolCallPayload):
                    state, more = self._sealed([compaction], state)
                    events += more
                    calls_model = False
                elif compaction is not None and writes_summary(state.config.model):
                    summarize, calls_model = (state, compaction), False  # the model writes it first
                elif compaction is not None:
                    state, more = self._sealed([compaction], state)
                    events += more
                break
            if not step:
                break
            state, more = self._sealed(step, state)
            events += more
        self._counted_plan = None  # counted for this state only
        return state, events, calls_model, summarize

    async def _within_linger(self, answered: asyncio.Task) -> "_ModelDone | None":
        """The model's answer if it comes within `model_linger_s`, else None (still running)."""
        if self.deps.model_linger_s <= 0:
            return None
        finished, _ = await asyncio.wait({answered}, timeout=self.deps.model_linger_s)
        return answered.result() if finished else None

    def _planned_compaction(self, state: SessionState) -> Draft | None:
        """The compaction due before this model call: the one the model's own count asked
        for (handed back by `_model_answer`); for a model without a count, the estimate's.
        A model that counts is never compacted on the estimate: its count decides."""
        if self._counted_plan is not None:
            return self._counted_plan
        if self._counter(state) is not None:
            return None  # `_model_answer` counts first
        return plan_compaction(state, build_request(state, self.deps.tools))

    def _counter(self, state: SessionState) -> Callable[[ModelRequest], Awaitable[int]] | None:
        """The model's token count (Claude's count_tokens); None for the scripted model."""
        try:
            model = self.deps.model_for(state.config.model)
        except Exception:
            return None  # the model call reports why
        counter: Callable[[ModelRequest], Awaitable[int]] | None = getattr(model, "count_tokens", None)
        return counter

    def _release_if_quiet(self) -> None:
        if self._quiet():
            self.deps.release(self._held)
            self._held = []

    def _quiet(self) -> bool:
        return self._model_task is None and next_step(self.state) is None

    @property
    def quiet(self) -> bool:
        """Idle: woken, no model call running and no step to take (read by a metric)."""
        return self.state.last_seq > 0 and self._quiet()

    async def _model_answer(self, state: SessionState) -> _ModelDone:
        """The model's answer to `state`'s request; runs beside the actor's loop, and only the
        loop appends what it says (inline in `_advance`, or through the mailbox: `_forward`)."""
        done = _ModelDone(turn=state.turns, reply=None)
        try:
            model = self.deps.model_for(state.config.model)
            request = build_request(state, self.deps.tools)
            async with self.deps.model_slots or _NO_LIMIT:
                done.compaction = await self._counted_compaction(model, state, request)
                if done.compaction is None:
                    done.reply = await self._complete(model, request, state.turns)
        except ModelError as err:
            done.error, done.retryable = str(err), err.retryable
        except Exception as err:  # a bug in an adapter must end the turn, not hang the session
            log.exception("model call failed for %s", self.session_id)
            done.error = f"{type(err).__name__}: {err}"
        return done

    async def _forward(self, answered: asyncio.Task) -> None:
        """The answer through the mailbox; cancelling this cancels the call."""
        await self.mailbox.put(await answered)

    async def _complete(self, model: Model, request: ModelRequest, turn: int) -> ModelReply:
        publish = self.deps.publish_delta
        if publish is None or not getattr(model, "streams", False):
            return await model.complete(request)  # no viewer, or a model with nothing to stream
        call, index = self.deps.new_id(), 0

        async def send(kind: DeltaKind, text: str = "") -> None:
            nonlocal index
            delta = ModelDelta(session_id=self.session_id, tenant=self.tenant, turn=turn, call=call, index=index,
                               kind=kind, text=text)
            index += 1
            try:
                await publish(delta)
            except Exception:  # viewers are a courtesy: the turn goes on without them
                log.debug("session %s: a delta was not published", self.session_id, exc_info=True)

        async def on_delta(kind: str, text: str) -> None:
            await send("thinking" if kind == "thinking" else "text", text)
        await send("start")  # a redone call starts over: viewers drop what they hold
        return await model.complete(request, on_delta)

    async def _counted_compaction(self, model: Model, state: SessionState, request: ModelRequest) -> Draft | None:
        """The compaction the model's own count asks for; None while the request fits, or
        for a model with no count (its estimate was planned in `_advance`). The API's count
        decides, asked once the request is near the window (`_near_window`); where the count
        fails, the local estimate stands."""
        count = getattr(model, "count_tokens", None)
        if count is None or just_compacted(state):
            return None  # compacted just now: call with what is left rather than compact again
        if not self._near_window(state, request) and state.memory_read is None:
            return None  # far from the window by both figures: not worth a count
        counted = self._planned_count if state.memory_read is not None else None
        if counted is None:  # (the read of the memory file left the request as it was counted)
            try:
                counted = TokenCount(await count(request), "count_tokens")
            except Exception as err:  # a count is advice: it never fails the turn
                log.warning("session %s: count_tokens failed, the local estimate stands: %s", self.session_id, err)
                counted = estimated(request)
        plan = plan_compaction(state, request, counted=counted)
        self._planned_count = counted if plan is not None else None
        return plan

    def _near_window(self, state: SessionState, request: ModelRequest) -> bool:
        """Past half the window by the estimate, or by the newest turn's usage with what came
        since (which sees what characters / 4 misses: tools, images, dense text)."""
        tokens = estimate_tokens(request)
        if self._last_turn is not None:
            tokens = max(tokens, usage_reading(state, *self._last_turn))
        return tokens >= state.config.context_window // 2

    def _note_tokens(self, event: e.Event) -> None:
        """Keeps the newest model turn's usage until a compaction makes it stale."""
        if isinstance(event, e.ModelResponded):
            u = event.payload.usage
            self._last_turn = (event.seq, u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
                               + u.output_tokens)
        elif isinstance(event, e.ContextCompacted):
            self._last_turn = self._planned_count = None

    async def _summarize(self, state: SessionState, plan: Draft) -> None:
        """The model's summary of what `plan` covers, beside the loop like a model call; a
        failed call falls back to the mechanical summary (the turn goes on either way). It is
        a model call like a turn's, so it takes one of the brain's `model_slots` too: a burst
        of compactions must not pile onto an overloaded API past the bound."""
        try:
            model = self.deps.model_for(state.config.model)
            async with self.deps.model_slots or _NO_LIMIT:
                reply = await model.complete(summary_request(state, plan))
            compaction = model_compaction(plan, reply, state.config.model)
        except Exception:
            log.exception("session %s: the summary call failed; compacting mechanically", self.session_id)
            compaction = plan
        compaction = await self._count_after(state, compaction)
        await self.mailbox.put(_SummaryDone(turn=state.turns, seq=state.last_seq, compaction=compaction))

    async def _count_after(self, state: SessionState, compaction: Draft) -> Draft:
        """`compaction` with the model's count of the request it leaves, where the model
        counts; as it is (the estimate) otherwise, or when the count fails."""
        count = self._counter(state)
        if count is None:
            return compaction
        after = apply(state, self._seal(compaction, state))  # sealed only to be folded: never written
        try:
            async with self.deps.model_slots or _NO_LIMIT:  # a request to the model's API, as the summary's
                tokens = await count(build_request(after, self.deps.tools))
        except Exception as err:
            log.warning("session %s: count_tokens after the compaction failed; its estimate stands: %s",
                        self.session_id, err)
            return compaction
        return counted_after(compaction, TokenCount(tokens, "count_tokens"))

    async def _append(self, drafts: list[Draft], snapshot: bool = False) -> None:
        state, events = self._sealed(drafts, self.state)
        await self._write(events, state, snapshot=snapshot)

    def _sealed(self, drafts: list[Draft], state: SessionState) -> tuple[SessionState, list[e.Event]]:
        """`drafts` sealed after `state`, and the state they leave; nothing is written."""
        events = []
        for draft in drafts:
            event = self._seal(draft, state)
            state = apply(state, event)
            events.append(event)
            self._note_tokens(event)
        return state, events

    async def _write(self, events: list[e.Event], state: SessionState, snapshot: bool = False) -> None:
        """Writes `events` (sealed after `self.state`, leaving `state`) with the tool calls
        they make issuable, in one transaction; `self.state` moves only once it committed."""
        if not events and not snapshot:
            return
        records = []
        for event in events:
            value = encode(event)
            check_record(value, self.deps.max_record_bytes, f"the {event.type} event at seq {event.seq}")
            records.append(Record(EVENTS, record_key(self.session_id), value))
        calls = self._tool_calls_to_issue(state)  # caused by the events, not by the snapshot after them
        snapshot_seq = self._snapshot_seq
        if snapshot or state.last_seq - snapshot_seq >= self.deps.snapshot_every:
            state, snapshot_seq = self._snapshot(state, records)
        await self.writer.append(records + list(calls.values()))
        self._issued.update(calls)  # only once sent: a refused append issues nothing
        self.state, self._snapshot_seq = state, snapshot_seq
        self._time_client_calls(state)

    def _time_client_calls(self, state: SessionState) -> None:
        """Starts the timer of each declared tool's call that waits for the harness and has
        none, and stops those of calls no longer pending. The wait is counted from the write
        here, or from the wake on a brain that took the session over (its timer is gone)."""
        limit = state.config.client_tool_timeout_s
        waiting = {c.tool_call_id for c in state.pending_tool_calls if c.answered_by == "client"}
        for call_id in list(self._client_timers):
            if call_id not in waiting:
                self._client_timers.pop(call_id).cancel()
        if limit is None:
            return
        for call_id in waiting - set(self._client_timers):
            async def expire(call_id: str = call_id) -> None:
                await asyncio.sleep(limit)
                await self.mailbox.put(_ClientTimeout(call_id))
            self._client_timers[call_id] = asyncio.create_task(expire())

    def _seal(self, draft: Draft, state: SessionState) -> e.Event:
        return seal(draft, session_id=self.session_id, tenant=self.tenant, seq=state.last_seq + 1,
                    prev_hash=state.last_hash, ts=self.deps.now(), event_id=self.deps.new_id())

    def _snapshot(self, state: SessionState, records: list[Record]) -> tuple[SessionState, int]:
        """Adds a snapshot of `state` to `records`, in the same transaction as the events
        before it. One over the record limit is not written (a wake then folds the whole
        log: slower, never wrong), and not tried again for another `snapshot_every` events."""
        event = self._seal(Draft(payload=snapshot_payload(state), actor="system:brain", trust="instruction"), state)
        value = encode(event)
        if len(value) > self.deps.max_record_bytes:
            if not self._snapshot_refused:
                log.warning("session %s: a snapshot at seq %d is %d bytes, over max_record_bytes; "
                            "its wakes fold the whole log", self.session_id, event.seq, len(value))
                self._snapshot_refused = True
            return state, state.last_seq
        records.append(Record(EVENTS, record_key(self.session_id), value))
        return apply(state, event), event.seq

    async def _snapshot_on_evict(self) -> None:
        """The next wake starts from here; a short tail since the last snapshot is not worth one."""
        if self.state.last_seq - self._snapshot_seq < self.deps.snapshot_on_evict_after:
            return
        try:
            await self._append([], snapshot=True)
        except WriterClosed:
            raise
        except Exception:  # the log is whole without it: eviction goes on
            log.exception("session %s: the snapshot on eviction failed", self.session_id)

    def _tool_calls_to_issue(self, state: SessionState) -> dict[str, Record]:
        """Pending calls go to the runners in the same transaction as the events that made
        them issuable; on wake every pending call is issued again with the same id."""
        if state.hands is not None or state.status in ("ended", "deleted"):
            return {}
        records = {}
        for call in state.pending_tool_calls:
            if call.tool_call_id in self._issued or call.tool_call_id in state.awaiting_approval:
                continue
            if call.answered_by == "client":
                continue  # the session's own harness answers it (GET .../tool-calls/stream), never a runner
            request = c.ToolCallRequest(session_id=self.session_id, tenant=self.tenant,
                                        tool_call_id=call.tool_call_id, name=call.name, input=call.input,
                                        timeout_s=state.config.tool_timeout_s, causation_seq=state.last_seq,
                                        issued_at=self.deps.now())
            value = encode(request)
            check_record(value, self.deps.max_record_bytes, f"tool call {call.tool_call_id}")
            records[call.tool_call_id] = Record(TOOL_CALLS, record_key(self.session_id), value)
        return records

    def held_tokens(self) -> list[Token]:
        return list(self._held)


@dataclass(frozen=True)
class MalformedInput:
    command_id: str
    reason: str
    code: e.RejectionCode = "malformed"
