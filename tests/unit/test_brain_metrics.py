"""The brain's model wrapper counts the tokens a reply reports by direction, the prompt
cache's apart (`wakeline_model_tokens_total`, docs/operations.md): the figures an operator's
cache hit rate is computed from; and by the tenant whose model slot the call holds
(`wakeline_tenant_model_tokens_total`)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from wakeline.contract.events import Usage
from wakeline.runtime.fair_slots import FairSlots
from wakeline_brain.actor_deps import ActorDeps
from wakeline_brain.metrics import TimedModel
from wakeline.agent.model import ModelReply, ModelRequest

DIRECTIONS = ("input", "output", "cache_creation", "cache_read")


class CachedModel:
    name = "claude-metrics"

    async def complete(self, request: ModelRequest, on_delta=None) -> ModelReply:
        return ModelReply(text="ok", usage=Usage(input_tokens=7, output_tokens=3, cache_creation_input_tokens=1200,
                                                 cache_read_input_tokens=9000))


def counted() -> dict[str, float]:
    return {d: REGISTRY.get_sample_value("wakeline_model_tokens_total",
                                         {"adapter": "anthropic", "direction": d}) or 0.0 for d in DIRECTIONS}


async def test_cache_tokens_are_counted_apart_from_the_uncached_input() -> None:
    request = ModelRequest(model="claude-metrics", system="s", messages=[{"role": "user", "content": "hi"}],
                           tools=[], max_tokens=16, session_id="s1", seq=1)
    before = counted()
    await TimedModel(CachedModel()).complete(request)
    await TimedModel(CachedModel()).complete(request)
    after = counted()
    assert {d: after[d] - before[d] for d in DIRECTIONS} == {
        "input": 14, "output": 6, "cache_creation": 2400, "cache_read": 18000}


def counted_for(tenant: str) -> dict[str, float]:
    return {d: REGISTRY.get_sample_value("wakeline_tenant_model_tokens_total",
                                         {"tenant": tenant, "direction": d}) or 0.0 for d in DIRECTIONS}


async def test_tokens_are_counted_for_the_tenant_whose_model_slot_the_call_holds() -> None:
    request = ModelRequest(model="claude-metrics", system="s", messages=[{"role": "user", "content": "hi"}],
                           tools=[], max_tokens=16, session_id="s2", seq=1)
    deps = ActorDeps(host="h", idle_evict_s=1, load=None, model_for=None, tools=[], release=None,  # type: ignore[arg-type]
                     dead_letter=None, now=None, new_id=None, model_slots=FairSlots(1))  # type: ignore[arg-type]
    model = TimedModel(CachedModel())
    before = {t: counted_for(t) for t in ("acme", "globex", "unknown")}
    async with deps.model_slot("acme"):
        await model.complete(request)
    async with deps.model_slot("globex"):
        await model.complete(request)
        await model.complete(request)
    await model.complete(request)  # outside any slot: nobody's, and visibly so
    gained = {t: {d: counted_for(t)[d] - before[t][d] for d in ("input", "cache_read")} for t in before}
    assert gained == {"acme": {"input": 7, "cache_read": 9000}, "globex": {"input": 14, "cache_read": 18000},
                      "unknown": {"input": 7, "cache_read": 9000}}
