"""The runner's fork server: a supervisor it forks outlives it, and a dead server costs no call.

No Kafka here: these drive the sandbox layer and the fork server directly, as the
adoption tests do. Tools wait on gate files the test creates, so nothing depends on timing.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path

import pytest

from runner_harness import BWRAP_MODES, GATED, GROUPS, sandbox_settings, wait_until
from wakeline_runner import forkserver
from wakeline_runner.forkserver import ForkServer
from wakeline_runner.isolation import probe
from wakeline_runner.records import read_json
from wakeline_runner.sandbox import Sandbox
from wakeline_runner.settings import RunnerSettings

@pytest.fixture(**BWRAP_MODES)
def settings(tmp_path: Path, request) -> RunnerSettings:
    return sandbox_settings(tmp_path, request.param)


@pytest.fixture
def sandbox(settings: RunnerSettings):
    sandbox = Sandbox(settings, probe(settings), GROUPS)
    yield sandbox
    sandbox.close()


def _server(sandbox: Sandbox):
    process = sandbox._forks._process
    assert process is not None, "no fork server running"
    return process


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


async def test_each_call_runs_under_a_supervisor_of_its_own_forked_by_one_server(sandbox) -> None:
    dirs = sandbox.open_session("default", str(uuid.uuid4()))
    first = await sandbox.run_bash(dirs, "toolu_one", "echo one", 20)
    server = _server(sandbox).pid
    second = await sandbox.run_bash(dirs, "toolu_two", "echo two", 20)

    assert (first.result.exit_code, first.result.stdout) == (0, "one\n")
    assert (second.result.exit_code, second.result.stdout) == (0, "two\n")
    assert _server(sandbox).pid == server  # one server for both
    pids = {read_json(dirs.call(call).started)["pid"] for call in ("toolu_one", "toolu_two")}
    assert len(pids) == 2 and server not in pids


async def test_a_server_that_died_between_calls_is_started_again_and_the_call_runs_once(sandbox) -> None:
    dirs = sandbox.open_session("default", str(uuid.uuid4()))
    await sandbox.run_bash(dirs, "toolu_before", "true", 20)
    dead = _server(sandbox)
    dead.kill()
    dead.wait()

    outcome = await sandbox.run_bash(dirs, "toolu_after", "echo run >> runs; echo after", 20)

    assert (outcome.result.exit_code, outcome.result.stdout) == (0, "after\n")
    assert (dirs.work / "runs").read_text() == "run\n"
    assert _server(sandbox).pid != dead.pid


async def test_the_server_ends_with_its_runner_and_the_supervisor_it_forked_runs_on(settings, sandbox) -> None:
    session_id, call_id = str(uuid.uuid4()), f"toolu_{uuid.uuid4().hex}"
    dirs = sandbox.open_session("default", session_id)
    call = asyncio.create_task(sandbox.run_bash(dirs, call_id, GATED, 30))
    await wait_until(lambda: (dirs.work / "runs").exists(), what="the tool to start")
    supervisor = read_json(dirs.call(call_id).started)["pid"]
    server = _server(sandbox)
    # The runner dies: its call's task and its end of the server's socket go with it.
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)
    sandbox.close()

    assert server.poll() is not None, "the fork server outlived its runner"
    assert _alive(supervisor) and os.getsid(supervisor) == supervisor  # a session of its own
    successor = Sandbox(settings, probe(settings), GROUPS)
    try:
        adopted = asyncio.create_task(successor.run_bash(successor.open_session("default", session_id),
                                                         call_id, GATED, 30))
        (dirs.work / "go").touch()
        outcome = await asyncio.wait_for(adopted, 20)
    finally:
        successor.close()
    assert (outcome.result.exit_code, outcome.result.stdout) == (0, "finished\n")
    assert (dirs.work / "runs").read_text() == "run\n"


async def test_a_server_that_never_answers_is_replaced_and_the_request_reported_unknown(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(forkserver, "REPLY_TIMEOUT_S", 0.5)
    forks = ForkServer()
    started, log = tmp_path / "call.started.json", tmp_path / "call.log"
    lock_fd = os.open(tmp_path / "call.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        forks._connected()
        stuck = forks._process
        assert stuck is not None
        os.kill(stuck.pid, signal.SIGSTOP)  # alive, so the request is taken, but never read

        assert forks.spawn(str(started), str(log), str(tmp_path), lock_fd) is None
        assert stuck.poll() is not None and forks._process is None  # killed, not left behind
        # The next request gets a server that answers (its child fails on the missing spec).
        pid = forks.spawn(str(started), str(log), str(tmp_path), lock_fd)
        assert isinstance(pid, int) and pid > 0
        await wait_until(lambda: "FileNotFoundError" in (log.read_text() if log.exists() else ""),
                         what="the supervisor's complaint in its log")
    finally:
        forks.close()
        os.close(lock_fd)
