"""The short form of `make chaos`: random kill -9 of brains, runners and the archiver under load.

~12 kills about 5 s apart while ~10 scripted sessions with counted side effects run
(2 brains, 2 runners, 1 archiver, 1 gateway, each its own process). Nothing may be lost,
doubled or run twice, and every session started must complete: the fault figures are
counted on completed sessions, so a session a kill lost or stalled would otherwise fail
nothing. The same judgement as `make chaos` (`failures`), which runs the long form with
≥100 kills.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from bench.chaos.__main__ import failures
from bench.chaos.run import Plan, run
from tests.e2e.stack import require_database


# About 100 s when it passes; its own bounds (warm-up 180 s, drain 120 s) come first when not.
@pytest.mark.timeout(900)
def test_kill9_loop_of_brains_runners_and_archiver_loses_doubles_and_reruns_nothing(tmp_path):
    require_database()
    plan = Plan(kills=12, interval_s=5.0, in_flight=10, max_sessions=60, drain_s=120.0, seed=39)
    result = asyncio.run(run(plan, tmp_path))
    print(json.dumps(result))
    # The faults happened with work in flight: every kill was made (seed 39: 4 of brains,
    # 4 of runners, 4 of the archiver), sessions were started around them, and a brain
    # died holding sessions.
    assert result["kills"] == 12 and result["brain_kills"] == 4, json.dumps(result)
    assert result["next_event_after_brain_kill"]["affected"]["sessions"] >= 1, json.dumps(result)
    assert result["sessions_started"] >= 10, json.dumps(result)
    assert failures(result) == [], json.dumps(result)
