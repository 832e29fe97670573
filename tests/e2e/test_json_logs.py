"""WAKELINE_LOG_FORMAT=json on the real services: every line each one writes is one JSON
object, and the lines about a session carry its id, seq and tool call ids as fields."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.e2e.sessions import create_session, wait_ended
from tests.e2e.stack import require_database, running_stack


@pytest.fixture(scope="module")
def session_logs(tmp_path_factory):
    require_database()
    with running_stack(tmp_path_factory.mktemp("e2e-json-logs"), WAKELINE_LOG_FORMAT="json") as stack:
        with httpx.Client(base_url=stack.url, timeout=30, headers=stack.headers) as client:
            sid = create_session(client, "tools3")
            assert wait_ended(client, stack, sid)["ended_reason"] == "completed"
        stack.stop_all()  # their last lines written
        yield sid, {name: service.log.read_text() for name, service in stack.services.items()}


def test_every_line_of_every_service_is_a_json_object_with_the_common_keys(session_logs):
    _, texts = session_logs
    for name, text in texts.items():
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
        assert len(lines) >= 3, name
        assert all({"ts", "level", "service", "logger", "message"} <= set(line) for line in lines), name
        assert {line["service"] for line in lines} == {name}


def test_the_sessions_lines_carry_its_id_seq_and_tool_call_ids(session_logs):
    sid, texts = session_logs
    runner = [json.loads(line) for line in texts["runner"].splitlines() if line.strip()]
    calls = [line for line in runner if line["message"].startswith("tool call ")]
    assert all(line.get("session_id") and line.get("tool_call_id") and line["seq"] > 0 for line in calls)
    mine = [line for line in calls if line["session_id"] == sid]
    assert len(mine) == 3, mine  # tools3: write_file, bash, list_files
    assert len({line["tool_call_id"] for line in mine}) == 3
    assert {line["message"].split(":")[0] for line in mine} == {"tool call write_file", "tool call bash",
                                                                 "tool call list_files"}
    brain = [json.loads(line) for line in texts["brain"].splitlines() if line.strip()]
    woke = [line for line in brain if line["message"].startswith(f"woke session {sid}")]
    assert len(woke) == 1 and woke[0]["session_id"] == sid and woke[0]["seq"] == 0  # a new session
