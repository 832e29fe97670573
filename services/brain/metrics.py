"""What feeds the brain's metrics (declared below): a producer wrapper timing each
partition transaction and counting the events it commits, a model wrapper timing calls and
counting tokens, a quota-count wrapper counting refusals, and a sampler of the sessions in
memory and the consumer's lag. The writer, the actors and the model adapters know nothing of
it; app.py and models.py put it in place.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from wakeline.runtime import metrics, tracing
from wakeline.contract.commands import CommandBase
from wakeline.contract.quotas import Refusal
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
DEAD_BRAINS_REMOVED = Counter("wakeline_brain_dead_brains_removed_total",
                              "Brains this one removed from the group because their lease lapsed (their Postgres "
                              "session ended: the process died or stopped), by the coordinator's answer",
                              ["answer"])
SESSIONS = Gauge("wakeline_brain_sessions", "Sessions held in memory by this brain: live (a model call or a step "
                 "pending) or idle (waiting for input until evicted)", ["state"])
WAKE_SECONDS = Histogram("wakeline_brain_wake_seconds", "Waking a session: reading its log from the archive and "
                         "the tail, folding it, appending `woke`", buckets=metrics.SECONDS)
MODEL_SECONDS = Histogram("wakeline_model_call_seconds", "One model call, request to reply or error",
                          ["adapter", "outcome"], buckets=metrics.SECONDS)
QUOTA_REFUSALS = Counter("wakeline_brain_quota_rejections_total", "Commands from Kafka clients other than the "
                         "gateway refused because the tenant was over a rate quota: dead-lettered, and recorded "
                         "as input_rejected quota_exceeded where the session exists", ["tenant", "quota"])
MODEL_TOKENS = Counter("wakeline_model_tokens_total", "Tokens the model reported: input (uncached), output, and "
                       "the input the prompt cache wrote (cache_creation) and served (cache_read)",
                       ["adapter", "direction"])

TENANT_TOKENS = Counter("wakeline_tenant_tokens_total", "Tokens a tenant's model calls used (input, cached or not, "
                        "and output), as its tokens_per_day quota counts them", ["tenant"])
QUOTA_STOPS = Counter("wakeline_brain_quota_stops_total", "Model calls not made because the tenant's tokens_per_day "
                      "quota was used: each ended its session `quota`", ["tenant"])


class CountedRefusals:
    """The quota count (`QuotaCounts`), as the actors use it, with every refusal counted by tenant
    and quota: a tenant label is bounded by the tenants an operator created."""

    def __init__(self, counts: Any):
        self._counts = counts

    async def admit(self, command: CommandBase) -> Refusal | None:
        refusal = await self._counts.admit(command)
        if refusal is not None:
            QUOTA_REFUSALS.labels(command.tenant, refusal.quota).inc()
        return refusal


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
        usage = reply.usage
        MODEL_TOKENS.labels(self._adapter, "input").inc(usage.input_tokens)
        MODEL_TOKENS.labels(self._adapter, "output").inc(usage.output_tokens)
        # Input the prompt cache wrote and served, apart from `input` (the API counts them
        # apart): their ratio is the hit rate an operator watches (docs/operations.md).
        MODEL_TOKENS.labels(self._adapter, "cache_creation").inc(usage.cache_creation_input_tokens)
        MODEL_TOKENS.labels(self._adapter, "cache_read").inc(usage.cache_read_input_tokens)
        return reply


def start_samplers(brain: Any, consumer: Any) -> list[asyncio.Task[None]]:
    """Sessions in memory (live or idle) and the consumer's lag, every second."""
    async def sessions() -> None:
        actors = [actor for actor, _ in list(brain.actors.values())]
        idle = sum(1 for actor in actors if actor.quiet)
        SESSIONS.labels("idle").set(idle)
        SESSIONS.labels("live").set(len(actors) - idle)
    return [metrics.every(1.0, sessions), metrics.every(1.0, lambda: metrics.sample_consumer_lag(consumer, "brain"))]
