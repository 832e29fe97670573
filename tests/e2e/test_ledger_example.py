"""The ledger examples (examples/ledger_harness.py and .mjs) as a user runs them: separate
processes against the stack, the first Python harness killed with SIGKILL while its call is
pending, a fresh one handed the same call and answering it once (what `make demo-harness` shows)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.e2e.sessions import session_status, wait_ended, wait_for
from tests.e2e.stack import ROOT, Stack
from tests.e2e.stored_log import assert_log_whole
from tests.requirements import missing

EXAMPLES = ROOT / "examples"
RECEIVED = re.compile(r"^call (\S+) received", re.M)
ANSWERED = re.compile(r"^call (\S+) answered: ok", re.M)


def example_env(stack: Stack, tmp_path: Path) -> dict[str, str]:
    key = stack.headers["Authorization"].removeprefix("Bearer ")
    return {**os.environ, "WAKELINE_GATEWAY_URL": stack.url, "WAKELINE_API_KEY": key,
            "LEDGER_DB": str(tmp_path / "ledger.sqlite3")}


def python_harness(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLES / "ledger_harness.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def pending(client: httpx.Client, sid: str) -> list:
    session = session_status(client, sid) or {}
    return [session.get("status"), session.get("pending_client_calls")]


def test_the_e2e_ledger_policy_is_the_packaged_one():
    packaged = ROOT / "services" / "brain" / "policies" / "ledger.json"
    assert (ROOT / "tests" / "e2e" / "policies" / "ledger.json").read_bytes() == packaged.read_bytes()


def test_a_harness_killed_mid_call_hands_the_same_call_to_the_next_which_answers_it_once(stack, client, tmp_path):
    env = example_env(stack, tmp_path)
    created = python_harness(env, "--create")
    assert created.returncode == 0, created.stderr
    sid = created.stdout.strip()
    log = tmp_path / "harness1.log"
    with open(log, "w") as out:
        first = subprocess.Popen([sys.executable, str(EXAMPLES / "ledger_harness.py"), sid, "--hang-on-first-call"],
                                 cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        call_id = wait_for(lambda: next(iter(RECEIVED.findall(log.read_text())), None), 60,
                           "the first harness to receive a call", stack)
        wait_for(lambda: pending(client, sid) == ["waiting_client", [call_id]], 30, f"{call_id} pending", stack)
    finally:
        first.send_signal(signal.SIGKILL)  # no shutdown code runs, as in a machine loss
        first.wait(timeout=10)
    assert pending(client, sid) == ["waiting_client", [call_id]]  # the session waits on, for the same call

    second = python_harness(env, sid)
    assert second.returncode == 0, second.stdout + second.stderr
    assert RECEIVED.findall(second.stdout)[0] == call_id, second.stdout  # re-issued: the same id
    assert ANSWERED.findall(second.stdout).count(call_id) == 1, second.stdout

    assert wait_ended(client, stack, sid)["ended_reason"] == "completed"
    events = assert_log_whole(sid)
    assert [e.payload.tool_call_id for e in events if e.type == "tool_call"].count(call_id) == 1
    results = [e for e in events if e.type == "tool_result"]
    assert len(results) == 2 and [r.payload.tool_call_id for r in results].count(call_id) == 1
    assert all(not r.payload.is_error and r.actor == "user:local" for r in results)
    report = [e for e in events if e.type == "model_turn"][-1].payload.text
    assert "February 2026 is the outlier" in report and "Acme" in report, report
    assert report.split("\n", 1)[0] in second.stdout  # the harness prints the report


def test_the_javascript_ledger_harness_answers_a_session_to_completion(stack, tmp_path):
    node = shutil.which("node")
    if node is None:
        missing("node is needed for examples/ledger_harness.mjs (Debian: apt-get install nodejs)")
    env = example_env(stack, tmp_path)
    run = [node, str(EXAMPLES / "ledger_harness.mjs")]
    created = subprocess.run([*run, "--create"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert created.returncode == 0, created.stderr
    sid = created.stdout.strip()
    done = subprocess.run([*run, sid], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(set(ANSWERED.findall(done.stdout))) == 2, done.stdout
    assert f"session {sid} ended: completed" in done.stdout
    assert re.search(r"report: Report: February 2026 is the outlier.*Acme", done.stdout, re.S), done.stdout
