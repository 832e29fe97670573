"""deploy/services.sh: supervised services restart on exit, report restarts, and `down` stops
only what `up` started. Stand-in services (a script where the venv's python would be) keep
this about the supervision, not about Kafka; the real services run under it in `make demo`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.e2e.stack import free_port

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("archiver", "runner", "brain", "gateway", "signer")
FAKE_SERVICE = """#!/usr/bin/env bash
# stands in for the console script wakeline-<service>: logs what the real one logs when ready
svc=${0##*/wakeline-}
child=""
trap '[ -n "$child" ] && kill "$child"; echo "$svc stopping"; exit 0' TERM
if [ "$svc" = gateway ]; then
  python3 -m http.server --bind 127.0.0.1 --directory "$FAKE_WWW" "$WAKELINE_HTTP_PORT" & child=$!
elif [ "$svc" != "${FAKE_NEVER_READY:-}" ]; then
  sleep "${FAKE_START_DELAY:-0}"
  echo "$svc fake started"
fi
while :; do sleep 0.2; done
"""


def wait_for(predicate, timeout: float = 20.0, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def fake_checkout(tmp_path: Path, **extra: str) -> tuple[dict[str, str], Path]:
    """A checkout whose venv's service scripts are FAKE_SERVICE: (environment for services.sh, its run dir)."""
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    for s in SERVICES:
        fake = tmp_path / ".venv" / "bin" / f"wakeline-{s}"
        fake.write_text(FAKE_SERVICE)
        fake.chmod(0o755)
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "healthz").write_text("ok")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAKELINE_")}
    env.update(WAKELINE_ROOT=str(tmp_path), WAKELINE_HTTP_PORT=str(free_port()), FAKE_WWW=str(tmp_path / "www"),
               **extra)
    return env, tmp_path / ".data" / "run"


def services_sh(command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "deploy" / "services.sh"), command], env=env,
                          capture_output=True, text=True, timeout=90)


def test_up_waits_for_each_service_however_long_its_log_and_start_take(tmp_path):
    """Logs kept from earlier runs (well past a pipe buffer, ready lines of old runs in them) and
    services slower to start than any fixed poll: `up` still reports each one ready, and only once
    this run's service said so."""
    env, run = fake_checkout(tmp_path, FAKE_START_DELAY="6")
    logs = tmp_path / ".data" / "logs"
    logs.mkdir(parents=True)
    for s in SERVICES:
        old_run = f"2026-01-01 00:00:00 supervise {s}: starting old\n{s} fake started\n"
        (logs / f"{s}.log").write_text(old_run + "".join(f"{s} INFO old line {i} {'x' * 60}\n" for i in range(5000)))
    try:
        up = services_sh("up", env)
        assert up.returncode == 0, up.stdout + up.stderr
        assert all(f"{s}: ready" in up.stdout for s in SERVICES), up.stdout
        for s in ("archiver", "runner", "brain"):  # ready means this run's line, not the old run's
            assert (logs / f"{s}.log").read_text().count(f"{s} fake started") == 2, s
    finally:
        services_sh("down", env)


def test_up_fails_naming_the_service_that_never_became_ready(tmp_path):
    env, run = fake_checkout(tmp_path, FAKE_NEVER_READY="brain", WAKELINE_READY_TIMEOUT="8")
    try:
        up = services_sh("up", env)
        assert up.returncode == 1, up.stdout + up.stderr
        assert "brain: not ready within 8 s" in up.stderr, up.stderr
        assert all(f"{s}: ready" in up.stdout for s in ("archiver", "runner", "gateway")), up.stdout
        assert "brain: ready" not in up.stdout
    finally:
        services_sh("down", env)
    assert not list(run.glob("*.pid"))


def test_supervised_services_restart_after_kill9_and_down_leaves_other_processes_alone(tmp_path):
    env, run = fake_checkout(tmp_path)
    fake = tmp_path / ".venv" / "bin" / "wakeline-runner"

    def services(command: str) -> subprocess.CompletedProcess:
        return services_sh(command, env)

    # a process of the same checkout that services.sh did not start (as the e2e tests' are)
    bystander = subprocess.Popen([str(fake)], env=env, stdout=subprocess.DEVNULL,
                                 start_new_session=True)
    try:
        up = services("up")
        assert up.returncode == 0, up.stdout + up.stderr
        assert all(f"{s}: ready" in up.stdout for s in SERVICES), up.stdout
        pids = {s: int((run / f"{s}.pid").read_text()) for s in SERVICES}

        os.kill(pids["brain"], signal.SIGKILL)
        wait_for(lambda: (run / "brain.restarts").read_text().strip() == "1", what="the brain's restart")
        restarted = wait_for(lambda: (p := int((run / "brain.pid").read_text())) != pids["brain"] and alive(p) and p,
                             what="a new brain pid")
        status = services("status").stdout
        assert f"brain: running (pid {restarted}," in status and "restarts 1" in status, status
        assert "exited with exit code 137 (signal 9)" in (tmp_path / ".data" / "logs" / "brain.log").read_text()

        down = services("down")
        assert down.returncode == 0, down.stdout + down.stderr
        assert not any(alive(p) for p in [*pids.values(), restarted])
        assert not list(run.glob("*.pid"))
        assert bystander.poll() is None, "services.sh down stopped a process it did not start"
        assert "stopped" in services("status").stdout
    finally:
        services("down")
        bystander.terminate()
        bystander.wait(timeout=10)
