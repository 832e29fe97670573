"""Hostile tools on the real runner (real broker, bubblewrap, per-session uids and cgroups).

Each test runs a runner in-process through the `harness` fixture, lets one session's tool
do something hostile, and asserts that it was refused or contained, that the runner is
still running, and (where it matters) that other sessions' calls kept completing (counted).
The runner is root here, as in CI, so per-session uids and control groups are in force.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

from runner_harness import Harness, others_keep_completing, processes_with, wait_until
from wakeline.contract.commands import ToolCallRequest
from wakeline.transport.kafka_io import send_keyed
from wakeline.contract.topics import TOOL_CALLS
from wakeline_runner.isolation import Isolation

pytestmark = pytest.mark.kafka
ROOT = Path(os.environ.get("WAKELINE_ROOT", Path(__file__).resolve().parents[2])).resolve()


def bash_result(report) -> dict:
    return json.loads(report.output)


async def run(harness: Harness, session_id: str, command: str, timeout_s: float = 30.0) -> dict:
    request, _ = await harness.call(session_id, command, timeout_s=timeout_s)
    report = await harness.result(request)
    return {"is_error": report.is_error, "error_kind": report.error_kind, **bash_result(report)}


async def file_tool(harness: Harness, session_id: str, name: str, tool_input: dict) -> dict:
    request = ToolCallRequest(session_id=session_id, tenant="default", tool_call_id=f"toolu_{uuid.uuid4().hex}",
                              name=name, input=tool_input, timeout_s=30, causation_seq=1,
                              issued_at=datetime.now(timezone.utc))
    await send_keyed(harness.producer, TOOL_CALLS, session_id, request, harness.kafka.partitions)
    report = await harness.result(request)
    return {"is_error": report.is_error, "error_kind": report.error_kind, **json.loads(report.output)}


def processes_of_uid(uid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Uid:") and int(line.split()[1]) == uid:
                found.append(int(entry.name))
    return found


def session_uid(harness: Harness, session_id: str) -> int:
    s = harness.settings()
    owner = Isolation(True, (s.sandbox_uid_base, s.sandbox_uid_count), s.tmp_bytes, "").identity("default", session_id)
    assert owner is not None
    return owner[0]


async def test_a_fork_bomb_is_contained_to_its_session_and_others_keep_completing(harness: Harness) -> None:
    bomber = str(uuid.uuid4())
    async with harness.runner_running(nproc=64) as runner:
        request, _ = await harness.call(bomber, "bomb() { bomb | bomb & }; bomb; sleep 30", timeout_s=8)
        uid = session_uid(harness, bomber)
        await wait_until(lambda: len(processes_of_uid(uid)) >= 32, 10, "the fork bomb to spread")
        # While it is at its limit, every other session's calls still run: their uid and
        # control group are their own, so the bomb's exhausted process count is not theirs.
        assert await others_keep_completing(harness, 6) == 6
        assert len(processes_of_uid(uid)) <= 64 + 2  # its session's pids limit (+ bwrap and setpriv)
        report = await harness.result(request)
        assert report.is_error and report.error_kind == "timeout"
        await wait_until(lambda: not processes_of_uid(uid), 10, "every process of the bomb to be gone")
        assert not runner.done()


async def test_filling_tmp_is_a_clear_tool_error_and_the_runner_keeps_serving(harness: Harness) -> None:
    session_id = str(uuid.uuid4())
    async with harness.runner_running(tmp_bytes=16 * 1024**2) as runner:
        filled = await run(harness, session_id, "dd if=/dev/zero of=/tmp/fill bs=1M count=64; echo rc=$?")
        assert "No space left on device" in filled["stderr"]
        assert "rc=1" in filled["stdout"]
        # The next call has a fresh, empty /tmp of its own, and can use it.
        again = await run(harness, session_id, "ls -A /tmp; echo x > /tmp/y && cat /tmp/y")
        assert "fill" not in again["stdout"] and again["stdout"].endswith("x\n")
        assert await others_keep_completing(harness, 6) == 6
        assert not runner.done()


async def test_growing_the_work_dir_past_its_budget_stops_the_call_and_leaves_it_cleanable(harness: Harness) -> None:
    session_id = str(uuid.uuid4())
    async with harness.runner_running(work_dir_bytes=32 * 1024**2) as runner:
        # 100 files of 8 MB: each under RLIMIT_FSIZE, together 25 times the budget.
        filled = await run(harness, session_id, "for i in $(seq 1 100); do head -c 8000000 /dev/zero > f$i; done")
        assert filled["is_error"] and filled["error_kind"] == "too_large"
        assert "work dir grew past its budget" in filled["message"]
        used = sum(p.stat().st_size for p in harness.work(session_id).iterdir())
        assert used < 600 * 1024**2  # stopped long before the loop's 800 MB
        cleaned = await run(harness, session_id, "rm -f f*; echo clean")
        assert cleaned["stdout"] == "clean\n"
        assert (await run(harness, session_id, "head -c 1000000 /dev/zero > small && echo ok"))["stdout"] == "ok\n"
        assert await others_keep_completing(harness, 6) == 6
        assert not runner.done()


async def test_no_call_starts_when_the_disk_is_below_the_reserve_and_the_runner_stays_up(harness: Harness) -> None:
    session_id = str(uuid.uuid4())
    async with harness.runner_running(disk_reserve_bytes=10**18) as runner:
        refused = await run(harness, session_id, "echo should-not-run > ran")
        assert refused["is_error"] and refused["error_kind"] == "too_large"
        assert "reserve" in refused["message"]
        assert not (harness.work(session_id) / "ran").exists()
        assert not runner.done()


async def test_a_tool_sees_nothing_of_the_host_it_does_not_need(harness: Harness, monkeypatch) -> None:
    secret = f"runner-secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("WAKELINE_TEST_SECRET", secret)
    neighbour, prober = str(uuid.uuid4()), str(uuid.uuid4())
    async with harness.runner_running() as runner:
        assert (await run(harness, neighbour, "echo private > diary"))["stdout"] == ""
        targets = {
            "broker data": ROOT / ".data" / "kafka",
            "keys": ROOT / ".data" / "keys",
            "database": ROOT / ".data" / "postgres",
            "the repo": ROOT,
            "another session's work dir": harness.work(neighbour) / "diary",
            "the runner's home": Path("/root"),
            "host users": Path("/home"),
            "shadow": Path("/etc/shadow"),
        }
        for what, path in targets.items():
            seen = await run(harness, prober, f"ls -la {path} 2>&1; cat {path} 2>&1; echo rc=$?")
            assert "No such file or directory" in seen["stdout"], (what, seen)
            assert "private" not in seen["stdout"], what
        environ = await run(harness, prober, f"cat /proc/{os.getpid()}/environ /proc/*/environ 2>/dev/null")
        assert secret not in environ["stdout"] and "PATH=" in environ["stdout"]  # its own, not the runner's
        pids = await run(harness, prober, "ls /proc | grep -c '^[0-9]'")
        assert int(pids["stdout"]) < 10  # its own pid namespace: a handful of processes
        broker_port = harness.kafka.kafka_bootstrap.rsplit(":", 1)[1]
        net = await run(harness, prober, f"(exec 3<>/dev/tcp/127.0.0.1/{broker_port}) 2>&1 && echo connected; "
                                         "(exec 3<>/dev/tcp/1.1.1.1/80) 2>&1 && echo connected")
        assert "connected" not in net["stdout"]
        interfaces = await run(harness, prober, "tail -n +3 /proc/net/dev | cut -d: -f1")
        assert interfaces["stdout"].split() == ["lo"]  # a network namespace of its own, loopback only
        mine = await run(harness, prober, "id -un; id -u; echo x > /tmp/t && cat /tmp/t; python3 -c "
                                          "'import tempfile; print(tempfile.gettempdir())'; ls /")
        lines = mine["stdout"].splitlines()
        assert lines[0] == "session" and int(lines[1]) == session_uid(harness, prober)
        assert lines[2:4] == ["x", "/tmp"]
        assert set(lines[4:]) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin",
                                  "tmp", "usr", "var", "work"}
        assert not runner.done()


async def test_a_setsid_daemon_is_gone_after_its_call(harness: Harness) -> None:
    marker = str(random.randrange(10**8, 10**9))
    session_id = str(uuid.uuid4())
    async with harness.runner_running() as runner:
        done = await run(harness, session_id, f"setsid sleep 1003.{marker} </dev/null >/dev/null 2>&1 & "
                                              f"nohup setsid sleep 1004.{marker} </dev/null >/dev/null 2>&1 & "
                                              "echo left")
        assert done["stdout"] == "left\n" and not done["is_error"]
        await wait_until(lambda: not processes_with(f".{marker}"), 5, "the daemons to be gone")
        assert not runner.done()


async def test_links_to_outside_files_are_refused_by_read_file_and_write_file(harness: Harness) -> None:
    session_id = str(uuid.uuid4())
    outside = harness.tmp_path / "outside.txt"
    outside.write_text("host secret\n")
    async with harness.runner_running() as runner:
        await run(harness, session_id, "echo mine > mine.txt")
        work = harness.work(session_id)
        # What a tool could do on a host where it sees the file: planted here by the test.
        os.link(outside, work / "hard.txt")
        os.symlink(outside, work / "soft.txt")
        for name, kind in (("hard.txt", "permission_denied"), ("soft.txt", "path_escape")):
            read = await file_tool(harness, session_id, "read_file", {"path": name})
            assert read["is_error"] and read["error_kind"] == kind, (name, read)
            assert "host secret" not in json.dumps(read)
            written = await file_tool(harness, session_id, "write_file", {"path": name, "content": "pwned"})
            assert written["is_error"] and written["error_kind"] == kind, (name, written)
        assert outside.read_text() == "host secret\n"
        ok = await file_tool(harness, session_id, "read_file", {"path": "mine.txt"})
        assert ok["content"] == "mine\n"
        assert not runner.done()


def test_a_runner_where_bubblewrap_cannot_work_refuses_to_start(tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()  # a PATH with no bwrap on it
    env = {"PATH": str(bare), "WAKELINE_SANDBOX_ROOT": str(tmp_path / "sandboxes"), "PYTHONPATH": str(ROOT),
           "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "wakeline_runner"], env=env, capture_output=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode != 0
    stderr = done.stderr.decode()
    assert "refusing to start" in stderr and "bwrap is not on PATH" in stderr
    assert "WAKELINE_USE_BWRAP=off" in stderr


async def test_the_unsandboxed_mode_must_be_asked_for_and_says_so(harness: Harness, caplog) -> None:
    with pytest.raises(ValueError, match="fails closed"):
        harness.settings(use_bwrap="auto")
    async with harness.runner_running(use_bwrap="off") as runner:
        session_id = str(uuid.uuid4())
        seen = await run(harness, session_id, "echo on-the-host")
        assert seen["stdout"] == "on-the-host\n"
        assert not runner.done()
    assert any("UNSANDBOXED" in r.getMessage() for r in caplog.records)


async def test_write_file_keeps_to_the_work_dir_budget_too(harness: Harness) -> None:
    session_id = str(uuid.uuid4())
    async with harness.runner_running(work_dir_bytes=2 * 1024**2) as runner:
        assert (await run(harness, session_id, "head -c 1500000 /dev/zero > big && echo ok"))["stdout"] == "ok\n"
        refused = await file_tool(harness, session_id, "write_file", {"path": "more.txt", "content": "x" * 700_000})
        assert refused["is_error"] and refused["error_kind"] == "too_large"
        assert "budget" in refused["message"]
        assert not (harness.work(session_id) / "more.txt").exists()
        fits = await file_tool(harness, session_id, "write_file", {"path": "small.txt", "content": "x" * 1000})
        assert not fits["is_error"]
        assert not runner.done()


NON_ROOT_RUN = """
import asyncio, site, sys, uuid
site.addsitedir(sys.argv[1])
from pathlib import Path
from wakeline_runner.isolation import probe
from wakeline_runner.sandbox import Sandbox
from wakeline_runner.settings import RunnerSettings

async def main():
    settings = RunnerSettings(sandbox_root=Path(sys.argv[2]))
    sandbox = Sandbox(settings, probe(settings))
    dirs = sandbox.open_session("default", str(uuid.uuid4()))
    outcome = await sandbox.run_bash(dirs, "toolu_nonroot", sys.argv[3], 20)
    print(outcome.result.stdout, end="")

asyncio.run(main())
"""


def test_a_runner_that_is_not_root_still_hides_the_keys_and_the_broker(request) -> None:
    # The interpreter must be one uid 65534 can run (the venv's may live under /root).
    python = Path("/usr/bin/python3.11")
    if not python.exists():
        pytest.skip("no system python3.11 for a non-root runner")
    site_packages = Path(sys.prefix) / "lib" / "python3.11" / "site-packages"
    # pytest's tmp_path sits in a 0700 root directory; this one is the non-root runner's own.
    home = Path(tempfile.mkdtemp(prefix="wakeline-nonroot-"))
    os.chown(home, 65534, 65534)
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    script = home / "run.py"
    script.write_text(NON_ROOT_RUN)
    command = (f"id -u; ls {ROOT / '.data' / 'keys'} {ROOT / '.data' / 'kafka'} 2>&1; "
               f"cat /proc/net/dev | tail -n +3 | cut -d: -f1")
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(python), str(script),
                           str(site_packages), str(home / "sandboxes"), command],
                          capture_output=True, timeout=60, cwd=home, env={"HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "65534"
    assert sum("No such file or directory" in line for line in lines) == 2, lines
    assert lines[-1].strip() == "lo"
    assert b"not root" in done.stderr  # and it says what that costs
    assert b"cannot read" in done.stderr  # root's 0600 credentials: passed over, named, no traceback
