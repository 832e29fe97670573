"""The short form of `make chaos`: random kill -9 of brains, runners and the archiver under load.

~12 kills about 5 s apart while ~10 scripted sessions with counted side effects run
(2 brains, 2 runners, 1 archiver, 1 gateway, each its own process). Nothing may be lost,
doubled or run twice; sessions must keep completing (liveness is measured and printed,
and `make chaos` runs the long form with ≥100 kills).
"""

from __future__ import annotations

import asyncio
import json


from bench.chaos.__main__ import MUST_BE_ZERO
from bench.chaos.run import Plan, run
from tests.e2e.stack import require_database


def test_kill9_loop_of_brains_runners_and_archiver_loses_doubles_and_reruns_nothing(tmp_path):
    require_database()
    result = asyncio.run(run(Plan(kills=12, interval_s=5.0, in_flight=10, max_sessions=60, drain_s=120.0), tmp_path))
    print(json.dumps(result))
    assert {key: result[key] for key in MUST_BE_ZERO} == {key: 0 for key in MUST_BE_ZERO}, json.dumps(result)
    assert result["sessions_completed"] > 0, json.dumps(result)
