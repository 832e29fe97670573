"""`Sequencer`: what one append becomes in the log, and the model call it leads to.

`advance` appends drafts and every step the session then takes on its own (`next_step`:
turn markers, queued messages, the end) in one transaction, then starts the model call the
steps stop at. One transaction where there were up to four: a tool result, its turn's end
and the next turn's start go out together, which is what keeps the brain's Kafka requests,
and its CPU, per tool round trip down (issue 10). The log is the same events in the same
order; a crash loses the whole batch or nothing.

The linger rule: the model call starts from the sealed state, before that transaction
commits, and a reply that comes within `model_linger_s` is sealed into the same transaction
(with the tool calls it makes): a fast model's step costs one transaction, not a second one
right behind the first, which the coordinator refuses until the first's markers are
written. A slower reply comes through the mailbox as before. Starting early changes nothing
a crash can show: the transaction holds the input's events and the reply or neither, and
an input whose events are not committed is read again and answered again.

A compaction comes before the request it shortens: the read of the memory file first (a
tool call), then the compaction, recorded here, or summarized by the model first.
"""

from __future__ import annotations

import asyncio

from wakeline.agent.memory import compaction_step
from wakeline.agent.steps import CALL_MODEL, model_drafts, next_step
from wakeline.agent.summary import just_compacted, writes_summary
from wakeline.contract import events as e
from wakeline.log.chain import Draft
from wakeline.log.state import SessionState
from wakeline_brain.compaction_counts import CompactionCounts
from wakeline_brain.mail import ModelDone
from wakeline_brain.model_driver import ModelDriver
from wakeline_brain.session_log import SessionLog
from wakeline_brain.turn_gate import TurnGate

# At most this many model replies sealed into one transaction by `advance` (a model that
# always answers within the linger would otherwise never let the transaction go).
_MAX_INLINE_REPLIES = 8


class Sequencer:
    def __init__(self, log: SessionLog, model: ModelDriver, counts: CompactionCounts, gate: TurnGate):
        self._log, self._model, self._counts, self._gate = log, model, counts, gate

    async def advance(self, drafts: list[Draft]) -> None:
        """Appends `drafts`, the steps that follow on their own and any replies within the
        linger, in one transaction; then the model call (or summary) they stop at is awaited.
        A turn starts only with a running-session slot (`TurnGate`), given back once committed
        out of its turn."""
        before = self._log.state
        state, events = self._log.sealed(drafts, before)
        answered: asyncio.Task[ModelDone] | None = None
        task: asyncio.Task[None] | None = None
        try:
            inline, asked = 0, False
            while True:
                state, events, calls_model, summarize, asked = await self._steps(state, events, asked)
                answered = asyncio.create_task(self._model.answer(state)) if calls_model else None
                if answered is None or inline == _MAX_INLINE_REPLIES:
                    break
                done = await self._model.within_linger(answered)
                if done is None or done.reply is None or done.compaction is not None:
                    break  # slow, failed or compacting first: through the mailbox, as it always was
                inline += 1
                state, more = self._log.sealed(model_drafts(state, done.reply, f"agent:{state.config.model}"), state)
                events += more
            if answered is not None:
                task = asyncio.create_task(self._model.forward(answered))
            elif summarize is not None:
                task = asyncio.create_task(self._model.summarize(*summarize))
            await self._log.write(events, state)
        except BaseException:
            for started in (task, answered):
                if started is not None:
                    started.cancel()  # what it would answer was never committed
            raise
        if task is not None:
            self._model.task = task
        await self._gate.settle(before, state)

    async def _steps(self, state: SessionState, events: list[e.Event], asked: bool
                     ) -> tuple[SessionState, list[e.Event], bool, tuple[SessionState, Draft] | None, bool]:
        """The steps from `state` up to the next model call: (state, events so far, whether
        the model is to be called now, the compaction its summary call is for, whether the
        running-session slots were asked)."""
        calls_model, summarize = False, None
        while True:
            step, asked = await self._gate.gated(state, next_step(state), asked)
            if step is CALL_MODEL:
                calls_model = self._model.may_call
                # A compaction comes before the request it shortens; once recorded, that
                # request is sent (never a second compaction in a row).
                compaction = None
                if calls_model and not just_compacted(state):
                    compaction = self._counts.planned_compaction(state)
                if compaction is not None:
                    # first the memory file's read (a tool call), then, on its result, this again
                    compaction = compaction_step(state, compaction)
                if compaction is not None and isinstance(compaction.payload, e.ToolCallPayload):
                    state, more = self._log.sealed([compaction], state)
                    events += more
                    calls_model = False
                elif compaction is not None and writes_summary(state.config.model):
                    summarize, calls_model = (state, compaction), False  # the model writes it first
                elif compaction is not None:
                    state, more = self._log.sealed([compaction], state)
                    events += more
                break
            if not step:
                break
            state, more = self._log.sealed(step, state)
            events += more
        self._counts.counted_plan = None  # counted for this state only
        return state, events, calls_model, summarize, asked
