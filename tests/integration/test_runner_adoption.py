"""A bash tool outlives its runner: a fresh sandbox adopts it and reports it exactly once.

No Kafka here: these drive the sandbox layer directly. The "runner dies" by cancelling
its task and dropping its objects; the detached tool is left alone, as after `kill -9`.
Tools wait on gate files the test creates, so nothing depends on timing.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import uuid
from pathlib import Path

import pytest

from runner_harness import BWRAP_MODES, GATED, GROUPS, sandbox_settings, processes_with, wait_until
from tests.requirements import require
from wakeline.contract.commands import ToolCallRequest
from wakeline_runner.executor import Executor
from wakeline_runner.isolation import probe
from wakeline_runner.sandbox import Sandbox
from wakeline_runner.settings import RunnerSettings


@pytest.fixture(**BWRAP_MODES)
def settings(tmp_path: Path, request) -> RunnerSettings:
    return sandbox_settings(tmp_path, request.param)


@pytest.fixture
def isolation(settings: RunnerSettings):
    return probe(settings)


async def _start_and_abandon(settings, isolation, session_id: str, call_id: str, command: str):
    """Starts a call on a sandbox, waits for the tool to start, then lets that 'runner' die."""
    sandbox = Sandbox(settings, isolation, GROUPS)
    dirs = sandbox.open_session("default", session_id)
    task = asyncio.create_task(sandbox.run_bash(dirs, call_id, command, 30))
    await wait_until(lambda: (dirs.work / "runs").exists(), what="the tool to start")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return dirs


async def test_a_new_sandbox_adopts_a_running_tool_and_reports_it_once(settings, isolation) -> None:
    session_id, call_id = str(uuid.uuid4()), f"toolu_{uuid.uuid4().hex}"
    dirs = await _start_and_abandon(settings, isolation, session_id, call_id, GATED)

    successor = Sandbox(settings, isolation, GROUPS)
    adopted = asyncio.create_task(successor.run_bash(successor.open_session("default", session_id),
                                                     call_id, GATED, 30))
    (dirs.work / "go").touch()
    outcome = await asyncio.wait_for(adopted, 20)

    assert outcome.error_kind is None
    assert (outcome.result.exit_code, outcome.result.stdout) == (0, "finished\n")
    assert (dirs.work / "runs").read_text() == "run\n"
    assert (dirs.work / "counter").read_text() == "line\n"


async def test_a_tool_that_finished_while_no_runner_lived_is_reported_then_replayed(settings, isolation) -> None:
    session_id, call_id = str(uuid.uuid4()), f"toolu_{uuid.uuid4().hex}"
    dirs = await _start_and_abandon(settings, isolation, session_id, call_id, GATED)
    (dirs.work / "go").touch()
    await wait_until(lambda: dirs.call(call_id).exit.exists(), what="the tool's exit record")

    executor = Executor(settings, Sandbox(settings, isolation, GROUPS))
    request = ToolCallRequest(session_id=session_id, tenant="default", tool_call_id=call_id, name="bash",
                              input={"command": GATED}, timeout_s=30, causation_seq=3)
    first = await executor.execute(request)
    again = await executor.execute(request)

    assert not first.is_error and '"stdout":"finished\\n"' in first.output
    assert (again.replayed, again.output) == (True, first.output)
    assert (dirs.work / "runs").read_text() == "run\n"


async def test_a_call_whose_processes_all_died_is_reported_crashed_and_not_rerun(settings, isolation) -> None:
    session_id, call_id = str(uuid.uuid4()), f"toolu_{uuid.uuid4().hex}"
    dirs = await _start_and_abandon(settings, isolation, session_id, call_id, GATED)
    os.killpg(int(dirs.call(call_id).lock.read_text()), signal.SIGKILL)  # as if the host went down

    successor = Sandbox(settings, isolation, GROUPS)
    outcome = await asyncio.wait_for(
        successor.run_bash(successor.open_session("default", session_id), call_id, GATED, 30), 20)

    assert outcome.error_kind == "crashed"
    assert "not re-run" in (outcome.message or "")
    assert (dirs.work / "runs").read_text() == "run\n"


async def test_a_timeout_kills_the_tools_children_and_detached_grandchildren(settings, isolation) -> None:
    marker = str(random.randrange(10**8, 10**9))
    # A background child, a grandchild in its own session, and a blocking foreground sleep.
    # Without bwrap's pid namespace, only the call's control group catches the setsid one:
    # with neither, the grandchild check would have to go, so the test stops here instead.
    require(isolation.use_bwrap or GROUPS is not None,
            f"no pid namespace (bwrap: {isolation.use_bwrap}) and no control group for the call "
            f"(cgroups.detect found none; run as root on a host with cgroups): a setsid grandchild escapes")
    command = f"sleep 1000.{marker} & setsid sleep 1002.{marker} & echo up; sleep 1001.{marker}"
    sandbox = Sandbox(settings, isolation, GROUPS)
    dirs = sandbox.open_session("default", str(uuid.uuid4()))

    call = asyncio.create_task(sandbox.run_bash(dirs, "toolu_timeout", command, 3))
    await wait_until(lambda: len(processes_with(f".{marker}")) >= 3, 5, "the tool's sleeps to start")
    outcome = await asyncio.wait_for(call, 20)

    assert outcome.error_kind == "timeout"
    assert outcome.result.stdout == "up\n"
    await wait_until(lambda: not processes_with(f".{marker}"), 5, "the tool's processes to be gone")
