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


async def test_the_mixed_session_has_thinking_a_second_message_and_compactions_and_its_figure_means_that() -> None:
    on, off = await prompt_cache.run_mixed(turns=14)
    assert on["requests"] == off["requests"] == 14 and on["summary_calls"] == off["summary_calls"] >= 1
    assert on["compactions_before"] == off["compactions_before"] != []
    assert 3 <= on["max_breakpoints"] <= 4 and off["max_breakpoints"] == 0
    # after a compaction only the tools and system prompt are the previous request's prefix
    assert all(0 < share < on["cacheable_share_mean_between_compactions"]
               for share in on["cacheable_share_after_compaction"])
    assert on["cacheable_share_after_second_message"] > 0.5  # the answered task stays cached
    assert off["cacheable_share_mean"] == 0.0
    got = await prompt_cache.mixed_requests(cache=True, turns=14)
    assert all(b["thinking"] == {"type": "enabled", "budget_tokens": 1024} for b in got["bodies"])
    answered = [m for b in got["bodies"][1:] for m in b["messages"] if m["role"] == "assistant"]
    assert answered and all(m["content"][0]["type"] == "thinking" and m["content"][0]["signature"]
                            for m in answered)  # sent back, signed: the fake refuses it otherwise
    second = got["bodies"][got["after_second_message"]]["messages"][-1]["content"]
    assert [b["text"] for b in second if b["type"] == "text"] == ["Now list them again, the other way round."]
