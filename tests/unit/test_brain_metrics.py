"""The brain's model wrapper counts the tokens a reply reports by direction, the prompt
cache's apart (`wakeline_model_tokens_total`, docs/operations.md): the figures an operator's
cache hit rate is computed from."""

from __future__ import annotations

from prometheus_client import REGISTRY

from wakeline.contract.events import Usage
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
