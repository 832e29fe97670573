"""What feeds the brain's metrics (declared below): a producer wrapper timing each
partition transaction and counting the events it commits, a model wrapper timing calls and
counting tokens (by adapter, and by the tenant whose call it is), and a sampler of the
sessions in memory and the consumer's lag. The writer, the actors and the model adapters
know nothing of it; app.py and models.py put it in place, and `ActorDeps.model_slot`, which
every model call holds, names the calling tenant (`calling_tenant`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from wakeline.runtime import metrics, tracing
from wakeline.contract.topics import EVENTS
from wakeline.agent.model import DeltaSink, Model, ModelReply, ModelRequest

# This service's metrics (names, labels and buckets: docs/operations.md says what each means).
TRANSACTION_SECONDS = Histogram("wakeline_brain_transaction_seconds", "A partition writer's transaction, begin to "
                                "commit (or failure): the durability step of every append", ["outcome"],
                                buckets=metrics.SECONDS)
EVENTS_APPENDED = Counter("wakeline_events_appended_total", "Records written to the events topic in committed "
                          "transactions")
STRAYS_ENDED = Counter("wakeline_brain_stray_transactions_ended_total",
                       "Partitions a brain writer found held by a transaction of its own producer id that nothing "
                       "would end, and ended with a commit of its own", ["topic"])
SESSIONS = Gauge("wakeline_brain_sessions", "Sessions held in memory by this brain: live (a model call or a step "
                 "pending) or idle (waiting for input until evicted)", ["state"])
WAKE_SECONDS = Histogram("wakeline_brain_wake_seconds", "Waking a session: reading its log from the archive and "
                         "the tail, folding it, appending `woke`", buckets=metrics.SECONDS)
MODEL_SECONDS = Histogram("wakeline_model_call_seconds", "One model call, request to reply or error",
                          ["adapter", "outcome"], buckets=metrics.SECONDS)
MODEL_TOKENS = Counter("wakeline_model_tokens_total", "Tokens the model reported: input (uncached), output, and "
                       "the input the prompt cache wrote (cache_creation) and served (cache_read)",
                       ["adapter", "direction"])
# Per tenant: bounded by the tenants an operator created, and "who spends the tokens" (against
# `tokens_per_day`) is the question. `unknown`: a call made outside `ActorDeps.model_slot`.
TENANT_TOKENS = Counter("wakeline_tenant_model_tokens_total", "Tokens the model reported for the tenant's "
                        "sessions' calls, by direction as wakeline_model_tokens_total", ["tenant", "direction"])
_CALLING_TENANT: ContextVar[str] = ContextVar("wakeline_calling_tenant", default="unknown")


@contextmanager
def calling_tenant(tenant: str) -> Iterator[None]:
    """The model calls made in this block (this task) are `tenant`'s."""
    token = _CALLING_TENANT.set(tenant)
    try:
        yield
    finally:
        _CALLING_TENANT.reset(token)


class TimedProducer:
    """A partition writer's transactional producer, as the writer uses it, with each
    transaction timed and the records it sent to the events topic counted once it commits."""

    def __init__(self, producer: Any):
        self._producer = producer
        self._events = 0

    def __getattr__(self, name: str) -> Any:  # start, stop, send_offsets_to_transaction, ...
        return getattr(self._producer, name)

    async def send(self, topic: str, *args: Any, **kwargs: Any) -> Any:
        if topic == EVENTS:
            self._events += 1
        return await self._producer.send(topic, *args, **kwargs)

    def add_to_transaction(self, tp: Any) -> None:
        """AddPartitionsToTxn for `tp` without a record (PartitionWriter.end_strays). aiokafka
        has no public call for it: this is the transaction manager's own step that `send`
        takes; checked here so an aiokafka that renamed it fails loudly, not silently."""
        manager = getattr(self._producer, "_txn_manager", None)
        add = getattr(manager, "maybe_add_partition_to_txn", None)
        if add is None:
            raise RuntimeError("aiokafka's producer no longer has _txn_manager.maybe_add_partition_to_txn; "
                               "PartitionWriter.end_strays needs another way to add a partition")
        add(tp)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        self._events = 0
        with metrics.Stopwatch() as watch:
            try:
                async with self._producer.transaction():
                    yield
            except BaseException:
                outcome = "failed"
                raise
            else:
                outcome = "committed"
                EVENTS_APPENDED.inc(self._events)
            finally:
                self._events = 0
        TRANSACTION_SECONDS.labels(outcome).observe(watch.seconds)


class TimedModel:
    """A model adapter with each call timed and its token usage counted, by adapter kind."""

    def __init__(self, model: Model):
        self._model = model
        self.name = model.name
        self._adapter = "scripted" if model.name.startswith("scripted:") else "anthropic"

    def __getattr__(self, name: str) -> Any:  # close, ...
        return getattr(self._model, name)

    async def complete(self, request: ModelRequest, on_delta: DeltaSink | None = None) -> ModelReply:
        outcome = "error"
        began = asyncio.get_running_loop().time()
        try:
            with tracing.TRACER.start_as_current_span("model call", attributes={"wakeline.adapter": self._adapter}):
                reply = await self._model.complete(request, on_delta)
            outcome = "ok"
        finally:
            MODEL_SECONDS.labels(self._adapter, outcome).observe(asyncio.get_running_loop().time() - began)
        usage, tenant = reply.usage, _CALLING_TENANT.get()
        # Input the prompt cache wrote and served, apart from `input` (the API counts them
        # apart): their ratio is the hit rate an operator watches (docs/operations.md).
        for direction, tokens in (("input", usage.input_tokens), ("output", usage.output_tokens),
                                  ("cache_creation", usage.cache_creation_input_tokens),
                                  ("cache_read", usage.cache_read_input_tokens)):
            MODEL_TOKENS.labels(self._adapter, direction).inc(tokens)
            TENANT_TOKENS.labels(tenant, direction).inc(tokens)
        return reply


def start_samplers(brain: Any, consumer: Any) -> list[asyncio.Task[None]]:
    """Sessions in memory (live or idle) and the consumer's lag, every second."""
    async def sessions() -> None:
        actors = [actor for actor, _ in list(brain.actors.values())]
        idle = sum(1 for actor in actors if actor.quiet)
        SESSIONS.labels("idle").set(idle)
        SESSIONS.labels("live").set(len(actors) - idle)
    return [metrics.every(1.0, sessions), metrics.every(1.0, lambda: metrics.sample_consumer_lag(consumer, "brain"))]
