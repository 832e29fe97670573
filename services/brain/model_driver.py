"""`ModelDriver`: a session's model calls, made beside its actor's loop.

A call (`answer`) first asks the model's own count whether to compact (`CompactionCounts`),
then for the reply, streaming its text to live viewers as deltas; only the actor's loop
appends what comes back, inline (`Sequencer.advance`) or through the mailbox (`forward`),
and `settle` turns it into drafts for the state the loop is in by then. A call that fails
with a passing cause (overload, rate limit) parks the turn `waiting_model` and calls again
after a backoff (`unavailable`); any other failure ends the turn with an error. A compaction
whose summary the model writes is a call of its own (`summarize`), which falls back to the
mechanical summary. Every request to the model's API takes one of the brain's model slots.

Before a call, the tenant's daily token quota (`TenantQuotas.spent`): once it is used the
call is not made and the answer is the session's end, reason `quota` (`agent.quota`), which
`settle` records like a reply; a count that cannot be read parks the turn as an unavailable
model does. After each call (a summary's too), its tokens are counted for the tenant.
"""

from __future__ import annotations

import asyncio
import logging

from wakeline.agent.model import Model, ModelError, ModelReply, ModelRequest
from wakeline.agent.quota import quota_end
from wakeline.agent.steps import failed_model_drafts, model_drafts
from wakeline.agent.summary import model_compaction, summary_request
from wakeline.contract import events as e
from wakeline.contract.deltas import DeltaKind, ModelDelta
from wakeline.log.chain import Draft
from wakeline.log.state import SessionState
from wakeline_brain.actor_deps import ActorView
from wakeline_brain.compaction_counts import CompactionCounts
from wakeline_brain.mail import ModelDone, RetryModel, SummaryDone

log = logging.getLogger(__name__)


class ModelDriver:
    def __init__(self, actor: ActorView, counts: CompactionCounts):
        self._actor = actor
        self._counts = counts
        self.task: asyncio.Task[None] | None = None  # the call (or summary) whose answer is awaited
        # While a parked turn waits out its backoff no model call starts (a wake starts over
        # without one: a new owner calls at once).
        self._retry: asyncio.Task[None] | None = None

    @property
    def may_call(self) -> bool:
        """Neither a call in flight nor a backoff running."""
        return self.task is None and self._retry is None

    def call_now(self) -> None:
        """A wake asks for the model now, not after the backoff."""
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None

    def stop(self) -> None:
        for task in (self.task, self._retry):
            if task:
                task.cancel()

    def settle(self, item: ModelDone | SummaryDone | RetryModel, state: SessionState) -> list[Draft]:
        """The drafts an answer makes where the session is now: none if its turn moved on."""
        if isinstance(item, SummaryDone):
            self.task = None
            if state.awaiting_model and state.turns == item.turn and state.last_seq == item.seq:
                return [item.compaction]
            return []
        if isinstance(item, RetryModel):
            self._retry = None
            return []  # the advance then finds the call due and makes it
        self.task = None
        if not (state.awaiting_model and state.turns == item.turn):
            return []
        if item.ended is not None:
            return [item.ended]
        if item.compaction is not None:
            self._counts.counted_plan = item.compaction  # the advance starts it, as any compaction
            return []
        if item.reply:
            return model_drafts(state, item.reply, f"agent:{state.config.model}")
        if item.retryable:
            return [self.unavailable(state, item.error or "model unavailable")]
        return failed_model_drafts(item.error or "model failed")

    async def answer(self, state: SessionState) -> ModelDone:
        """The model's answer to `state`'s request; runs beside the actor's loop, and only the
        loop appends what it says (inline in the advance, or through the mailbox: `forward`)."""
        done = ModelDone(turn=state.turns, reply=None)
        quotas = self._actor.deps.tenant_quotas
        try:
            if quotas is not None and not await self._within_quota(done):
                return done
            model = self._actor.deps.model_for(state.config.model)
            request = self._counts.request(state)
            async with self._actor.deps.model_slot(self._actor.tenant):
                done.compaction = await self._counts.counted_compaction(model, state, request)
                if done.compaction is None:
                    done.reply = await self._complete(model, request, state.turns)
            if quotas is not None and done.reply is not None:
                await quotas.count(self._actor.tenant, done.reply.usage)
        except ModelError as err:
            done.error, done.retryable = str(err), err.retryable
        except Exception as err:  # a bug in an adapter must end the turn, not hang the session
            log.exception("model call failed for %s", self._actor.session_id)
            done.error = f"{type(err).__name__}: {err}"
        return done

    async def _within_quota(self, done: ModelDone) -> bool:
        """False when the tenant's tokens for the day are used: `done` then ends the session. A
        count that cannot be read is a passing cause, as an overloaded model is."""
        assert self._actor.deps.tenant_quotas is not None
        try:
            spent = await self._actor.deps.tenant_quotas.spent(self._actor.tenant)
        except Exception as err:  # the database restarting: wait it out, as the model's weather
            raise ModelError(f"the tenant's token count could not be read: {err!r}", retryable=True) from err
        if spent is not None:
            done.ended = quota_end(spent)
        return spent is None

    async def forward(self, answered: asyncio.Task[ModelDone]) -> None:
        """The answer through the mailbox; cancelling this cancels the call."""
        await self._actor.mailbox.put(await answered)

    async def within_linger(self, answered: asyncio.Task[ModelDone]) -> ModelDone | None:
        """The model's answer if it comes within `model_linger_s`, else None (still running)."""
        if self._actor.deps.model_linger_s <= 0:
            return None
        finished, _ = await asyncio.wait({answered}, timeout=self._actor.deps.model_linger_s)
        return answered.result() if finished else None

    async def _complete(self, model: Model, request: ModelRequest, turn: int) -> ModelReply:
        publish = self._actor.deps.publish_delta
        if publish is None or not getattr(model, "streams", False):
            return await model.complete(request)  # no viewer, or a model with nothing to stream
        call, index = self._actor.deps.new_id(), 0

        async def send(kind: DeltaKind, text: str = "") -> None:
            nonlocal index
            delta = ModelDelta(session_id=self._actor.session_id, tenant=self._actor.tenant, turn=turn, call=call,
                               index=index, kind=kind, text=text)
            index += 1
            try:
                await publish(delta)
            except Exception:  # viewers are a courtesy: the turn goes on without them
                log.debug("session %s: a delta was not published", self._actor.session_id, exc_info=True)

        async def on_delta(kind: str, text: str) -> None:
            await send("thinking" if kind == "thinking" else "text", text)
        await send("start")  # a redone call starts over: viewers drop what they hold
        return await model.complete(request, on_delta)

    async def summarize(self, state: SessionState, plan: Draft) -> None:
        """The model's summary of what `plan` covers, beside the loop like a model call; a
        failed call falls back to the mechanical summary (the turn goes on either way). It is
        a model call like a turn's, so it takes one of the brain's `model_slots` too: a burst
        of compactions must not pile onto an overloaded API past the bound."""
        try:
            model = self._actor.deps.model_for(state.config.model)
            async with self._actor.deps.model_slot(self._actor.tenant):
                reply = await model.complete(summary_request(state, plan))
            if self._actor.deps.tenant_quotas is not None:
                await self._actor.deps.tenant_quotas.count(self._actor.tenant, reply.usage)
            compaction = model_compaction(plan, reply, state.config.model)
        except Exception:
            log.exception("session %s: the summary call failed; compacting mechanically", self._actor.session_id)
            compaction = plan
        compaction = await self._counts.count_after(state, compaction)
        await self._actor.mailbox.put(SummaryDone(turn=state.turns, seq=state.last_seq, compaction=compaction))

    def unavailable(self, state: SessionState, error: str) -> Draft:
        """Parks the turn `waiting_model` and starts the backoff after which it calls again."""
        attempt = state.model_failures + 1
        deps = self._actor.deps
        wait = min(deps.model_retry_s * 2 ** min(attempt - 1, 20), deps.model_retry_max_s)
        log.warning("session %s: the model is unavailable (attempt %d), calling again in %.1f s: %s",
                    self._actor.session_id, attempt, wait, error)

        async def later() -> None:
            await asyncio.sleep(wait)
            await self._actor.mailbox.put(RetryModel())
        self._retry = asyncio.create_task(later())
        payload = e.ModelUnavailablePayload(error=error[:2000], attempt=attempt, retry_in_s=wait)
        return Draft(payload=payload, actor="system:brain", trust="instruction")
