"""The replay check run in-process: by the gateway's route (`replay_judge.judge`, off the
event loop and bounded) and by its program's `--jsonl` reading (`wakeline-replay-check`).
The same verdicts on the real route and store: tests/integration/test_gateway_reads.py."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from pathlib import Path

import pytest

from wakeline.agent import replay_command
from wakeline.contract.events import parse_event
from wakeline_gateway import replay_judge
from wakeline_gateway.errors import ApiError

GOLDEN = Path(__file__).parent / "golden"


def golden(name: str) -> list:
    return [parse_event(line) for line in (GOLDEN / name).read_bytes().splitlines() if line.strip()]


async def test_the_route_judges_a_history_with_the_library_and_names_its_first_divergence() -> None:
    clean = await replay_judge.judge(golden("recorded_compaction.jsonl"))
    assert clean.clean and clean.divergence is None and clean.events == len(golden("recorded_compaction.jsonl"))
    basic = await replay_judge.judge(golden("session_basic.jsonl"))
    assert not basic.clean and basic.divergence is not None and basic.divergence.seq == 6


async def test_a_check_runs_off_the_event_loop_and_one_past_the_bound_is_a_503(monkeypatch) -> None:
    release = threading.Event()
    loop_thread = threading.get_ident()
    ran_on: list[int] = []

    def slow(session_id, events, tools):
        ran_on.append(threading.get_ident())
        release.wait(5)
        return {"session_id": session_id, "events": 0, "clean": True, "divergence": None}

    monkeypatch.setattr(replay_judge, "verdict", slow)
    monkeypatch.setattr(replay_judge, "TIMEOUT_S", 0.1)
    ticks = 0

    async def tick() -> None:  # the loop goes on while the check works
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)
    ticking = asyncio.create_task(tick())
    try:
        with pytest.raises(ApiError) as refused:
            await replay_judge.judge(golden("recorded_compaction.jsonl"))
    finally:
        release.set()
        ticking.cancel()
    assert (refused.value.status, refused.value.code) == (503, "replay_check_failed")
    assert "took longer than" in refused.value.detail
    assert ran_on and ran_on[0] != loop_thread and ticks >= 3


async def test_a_check_that_fails_is_a_503_naming_why(monkeypatch) -> None:
    def broken(session_id, events, tools):
        raise KeyError("no such step")

    monkeypatch.setattr(replay_judge, "verdict", broken)
    with pytest.raises(ApiError) as refused:
        await replay_judge.judge(golden("recorded_compaction.jsonl"))
    assert (refused.value.status, refused.value.code) == (503, "replay_check_failed")
    assert refused.value.detail == "the replay check did not run: KeyError: 'no such step'"


def test_the_program_reads_one_history_of_json_lines_and_exits_1_on_a_divergence(monkeypatch, capsys) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO((GOLDEN / "session_basic.jsonl").read_text()))
    assert replay_command.main(["--jsonl", "-", "--json"]) == 1
    [found] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert found["clean"] is False and found["divergence"]["seq"] == 6
    assert replay_command.main(["--jsonl", str(GOLDEN / "recorded_compaction.jsonl")]) == 0
    assert "replays cleanly" in capsys.readouterr().out
