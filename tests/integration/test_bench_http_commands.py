"""`bench.http_commands` in its shortest form: the code runs and its lines say what they claim.

Not a timing test: sizes are tiny and only shapes and sanity are checked. The brain and the
archiver run as processes (the bench needs a brain to answer and an archiver for reads);
the bench starts its own two gateways.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import http_commands
from conftest_pg import require_kafka, require_postgres
from tests.e2e.stack import Stack
from wakeline.runtime.settings import CommonSettings

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]
POLICIES = Path(http_commands.__file__).resolve().parent / "policies"


async def test_the_bench_reports_feed_and_polling_against_its_floor(tmp_path) -> None:
    await require_postgres()
    await require_kafka(CommonSettings())
    stack = Stack(tmp_path)
    try:
        for name in ("archiver", "brain"):
            stack.start(name, WAKELINE_POLICY_DIR=str(POLICIES))
        lines = await http_commands.run(rounds=1, per_round=2, run_dir=tmp_path)
    finally:
        stack.stop_all()
    by_name = {(line["bench"], line.get("gateway")): line for line in lines}
    assert set(by_name) == {("http_commands_floor_ms", None), ("http_message_done_ms", "feed"),
                            ("http_message_done_ms", "poll"), ("http_read_ms", None),
                            ("http_create_done_ms", "feed"), ("http_create_done_ms", "poll"),
                            ("sse_frame_ms", "feed"), ("sse_frame_ms", "poll")}
    floor = by_name["http_commands_floor_ms", None]
    for mode in ("feed", "poll"):
        done = by_name["http_message_done_ms", mode]
        assert done["n"] == 2 and 0 < done["p50"] <= done["p99"] and done["floor_p50"] == floor["p50"]
        assert done["ratio_p50"] == round(done["p50"] / floor["p50"], 2)
        # each message's turn is three events (user_message, turn_started..., session_ended) or more
        assert by_name["http_create_done_ms", mode]["n"] == 2
        assert by_name["sse_frame_ms", mode]["n"] >= 2 * 3
        assert by_name["sse_frame_ms", mode]["min"] > 0
