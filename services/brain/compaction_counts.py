"""`CompactionCounts`: the token figures that decide when a session compacts.

A model with a token count of its own (Claude's count_tokens) decides by it, never by the
estimate: the count is asked once the request nears the window by the local estimate or by
the newest turn's recorded usage (`near_window`), and the compaction it asks for is handed
to the next advance as `counted_plan`. A model without one compacts on the estimate
(`planned_compaction`). After a compaction the model counts the request it leaves
(`count_after`). A count is advice: one that fails leaves the estimate standing and never
fails the turn. What to compact, and the events it makes, is `wakeline.agent.context`'s.
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

from wakeline.agent.context import (
    TokenCount, build_request, counted_after, estimated, plan_compaction, usage_reading,
)
from wakeline.agent.context_cache import ContextCache
from wakeline.agent.model import Model, ModelRequest
from wakeline.agent.summary import just_compacted
from wakeline.contract import events as e
from wakeline.log.chain import Draft
from wakeline.log.fold import apply
from wakeline.log.state import SessionState
from wakeline_brain.actor_deps import ActorView
from wakeline_brain.session_log import sealed_event

log = logging.getLogger(__name__)
Counter = Callable[[ModelRequest], Awaitable[int]]


class CompactionCounts:
    def __init__(self, actor: ActorView):
        self._actor = actor
        # The compaction the model's count asked for, handed from the model's answer to the
        # next advance (`Sequencer`), for the state it was counted for only.
        self.counted_plan: Draft | None = None
        # (seq, tokens) of the newest model turn since the last compaction: its recorded usage
        # (input, cache, output), a count of the request it answered that costs no call.
        self._last_turn: tuple[int, int] | None = None
        # The count a planned compaction was decided by, for its record once the memory file's
        # read is in (a wake counts again).
        self._planned_count: TokenCount | None = None
        # The newest state's request and its estimate (states are immutable: the same object,
        # the same request), and the renderings it was built from, for the next.
        self._built: tuple[SessionState, ModelRequest, TokenCount] | None = None
        self._context = ContextCache()

    def note(self, event: e.Event) -> None:
        """Keeps the newest model turn's usage until a compaction makes it stale."""
        if isinstance(event, e.ModelResponded):
            u = event.payload.usage
            self._last_turn = (event.seq, u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
                               + u.output_tokens)
        elif isinstance(event, e.ContextCompacted):
            self._last_turn = self._planned_count = None

    def planned_compaction(self, state: SessionState) -> Draft | None:
        """The compaction due before this model call: the one the model's own count asked
        for (handed back by the model's answer); for a model without a count, the estimate's.
        A model that counts is never compacted on the estimate: its count decides."""
        if self.counted_plan is not None:
            return self.counted_plan
        if self.counter(state) is not None:
            return None  # the model's answer counts first
        request = self.request(state)
        return plan_compaction(state, request, counted=self.estimate(request))

    def request(self, state: SessionState) -> ModelRequest:
        """`build_request` for `state`, built once: the estimate above and the call after it
        (`ModelDriver.answer`) read the same request for the same state (issue 35: it was
        built twice a step), and from the renderings of the messages the session's last
        request had (`ContextCache`: rebuilt whole, a step's cost grew with the session)."""
        built = self._built
        if built is not None and built[0] is state:
            return built[1]
        request, tokens = self._context.build(state, self._actor.deps.tools)
        self._built = (state, request, tokens)
        return request

    def forget(self) -> None:
        """Out of its turn the session waits for someone else: the last request and the
        renderings are dropped, so a held idle session keeps only its state (the next
        request, a message away, is built whole once). A brain holds every session until idle
        eviction: kept, they were ~16 KB more per held session in `make bench`."""
        self._built = None
        self._context = ContextCache()

    @property
    def holding(self) -> bool:
        """Whether a request, or the renderings of one, are kept for the next call."""
        return self._built is not None or self._context.holding

    def estimate(self, request: ModelRequest) -> TokenCount:
        """`estimated(request)`: measured as it was built when it is the newest request."""
        built = self._built
        if built is not None and built[1] is request:
            return built[2]
        return estimated(request)

    def counter(self, state: SessionState) -> Counter | None:
        """The model's token count (Claude's count_tokens); None for the scripted model."""
        try:
            model = self._actor.deps.model_for(state.config.model)
        except Exception:
            return None  # the model call reports why
        counter: Counter | None = getattr(model, "count_tokens", None)
        return counter

    async def counted_compaction(self, model: Model, state: SessionState, request: ModelRequest) -> Draft | None:
        """The compaction the model's own count asks for; None while the request fits, or
        for a model with no count (its estimate was planned in the advance). The API's count
        decides, asked once the request is near the window (`near_window`); where the count
        fails, the local estimate stands."""
        count = getattr(model, "count_tokens", None)
        if count is None or just_compacted(state):
            return None  # compacted just now: call with what is left rather than compact again
        if not self.near_window(state, request) and state.memory_read is None:
            return None  # far from the window by both figures: not worth a count
        counted = self._planned_count if state.memory_read is not None else None
        if counted is None:  # (the read of the memory file left the request as it was counted)
            try:
                counted = TokenCount(await count(request), "count_tokens")
            except Exception as err:  # a count is advice: it never fails the turn
                log.warning("session %s: count_tokens failed, the local estimate stands: %s",
                            self._actor.session_id, err)
                counted = estimated(request)
        plan = plan_compaction(state, request, counted=counted)
        self._planned_count = counted if plan is not None else None
        return plan

    def near_window(self, state: SessionState, request: ModelRequest) -> bool:
        """Past half the window by the estimate, or by the newest turn's usage with what came
        since (which sees what characters / 4 misses: tools, images, dense text)."""
        tokens = self.estimate(request).tokens
        if self._last_turn is not None:
            tokens = max(tokens, usage_reading(state, *self._last_turn))
        return tokens >= state.config.context_window // 2

    async def count_after(self, state: SessionState, compaction: Draft) -> Draft:
        """`compaction` with the model's count of the request it leaves, where the model
        counts; as it is (the estimate) otherwise, or when the count fails."""
        count = self.counter(state)
        if count is None:
            return compaction
        after = apply(state, sealed_event(self._actor, compaction, state))  # sealed only to be folded: never written
        try:
            # a request to the model's API, as the summary's
            async with self._actor.deps.model_slot(self._actor.tenant):
                tokens = await count(build_request(after, self._actor.deps.tools))
        except Exception as err:
            log.warning("session %s: count_tokens after the compaction failed; its estimate stands: %s",
                        self._actor.session_id, err)
            return compaction
        return counted_after(compaction, TokenCount(tokens, "count_tokens"))
