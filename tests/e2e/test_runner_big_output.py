"""A tool output over the record limit, through four separate processes: cut, not fatal.

The session writes a 1 MB binary file and reads it whole with `read_file`. Before
results were cut to fit, that result could not be published, the runner stopped, and
every runner handed the call after it stopped too. Here the session completes with a
result marked truncated (with its original size), the runner stays up through a
restart, and other sessions keep completing. The policies live in a directory of this
module's own, so this file needs nothing beside it.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.e2e.sessions import create_session, wait_ended
from tests.e2e.stack import ROOT, Stack, require_database, running_stack
from tests.e2e.stored_log import assert_log_whole

BIG_READ = {
    "name": "bigread",
    "steps": [
        {"text": "Writing a binary file.", "tool_calls": [
            {"name": "bash", "input": {"command": "head -c 1048000 /dev/urandom > big.bin"}}]},
        {"text": "Reading it whole.", "tool_calls": [
            {"name": "read_file", "input": {"path": "big.bin", "max_bytes": 1048576}}]},
    ],
    "final": "Done.",
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    require_database()
    policies = tmp_path_factory.mktemp("policies")
    shutil.copy(ROOT / "tests" / "e2e" / "policies" / "tools3.json", policies)
    (policies / "bigread.json").write_text(json.dumps(BIG_READ))
    with running_stack(tmp_path_factory.mktemp("e2e-big"), WAKELINE_POLICY_DIR=str(policies)) as stack:
        yield stack


def run_sessions(client, stack: Stack, normal: int = 4) -> tuple[str, int]:
    """One big-read session beside `normal` ordinary ones; returns its id and how many others completed."""
    big = create_session(client, "bigread")
    others = [create_session(client, "tools3") for _ in range(normal)]
    assert wait_ended(client, stack, big, timeout=120)["ended_reason"] == "completed"
    completed = sum(wait_ended(client, stack, sid, timeout=120)["ended_reason"] == "completed" for sid in others)
    return big, completed


def read_result(session_id: str) -> dict:
    events = assert_log_whole(session_id)
    [result] = [e.payload for e in events if e.type == "tool_result" and e.payload.name == "read_file"]
    assert not result.is_error, result
    return json.loads(result.output)


def test_a_session_reading_a_1mb_binary_file_completes_with_a_truncated_result(stack, client):
    big, completed = run_sessions(client, stack)
    shown = read_result(big)
    assert (shown["truncated"], shown["size"]) == (True, 1_048_000)
    assert shown["original_bytes"] > 1_000_000 and 0 < len(shown["content"]) == shown["cut_to_chars"]
    assert completed == 4
    assert stack.services["runner"].alive, stack.report()


def test_after_a_runner_restart_no_crash_loop_and_sessions_keep_completing(stack, client):
    stack.services["runner"].kill9()
    stack.start("runner", "runner", WAKELINE_HOST="runner-2",
                WAKELINE_POLICY_DIR=stack.services["brain"].env["WAKELINE_POLICY_DIR"])
    big, completed = run_sessions(client, stack)
    assert read_result(big)["truncated"] is True
    assert completed == 4
    assert stack.services["runner"].alive, stack.report()
