"""The prompt-cache bench runs through the real SDK against the local Messages API server and
its figure means what it says: breakpoints within the API's limit, nearly the whole prefix
servable with caching on, none with it off, and none once the prefix changes."""

from __future__ import annotations

import copy

from bench import prompt_cache


async def test_the_bench_reports_caching_on_and_off_for_every_request() -> None:
    on, off = await prompt_cache.run(turns=8)
    assert (on["cache"], off["cache"]) == ("on", "off")
    assert on["requests"] == off["requests"] == 8
    assert 3 <= on["max_breakpoints"] <= 4 and off["max_breakpoints"] == 0
    assert on["cacheable_share_last"] > 0.8 and on["cacheable_share_min"] > 0.3
    assert off["cacheable_share_mean"] == off["cacheable_share_last"] == 0.0
    assert on["input_chars_last"] == off["input_chars_last"]  # the same requests, marks aside


async def test_a_changed_prefix_is_not_counted_as_servable() -> None:
    bodies = await prompt_cache.session_requests(turns=3, cache=True)
    assert prompt_cache.cacheable_share(bodies[1], bodies[2]) > 0.5
    changed = copy.deepcopy(bodies[2])
    changed["system"][0]["text"] += " (edited)"  # everything after the tools now differs
    pieces = prompt_cache.pieces(changed)
    tools = sum(len(p) for p, _ in pieces[: len(changed["tools"])]) / sum(len(p) for p, _ in pieces)
    assert prompt_cache.cacheable_share(bodies[1], changed) == tools  # only the tools' breakpoint still matches
    assert 0 < tools < 0.5
