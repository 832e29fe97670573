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
SERVICES = ("archiver", "runner", "brain", "gateway")
FAKE_PYTHON = """#!/usr/bin/env bash
# stands in for `python -m wakeline_<service>`: logs what the real one logs when ready
svc=${2#wakeline_}
child=""
trap '[ -n "$child" ] && kill "$child"; echo "$svc stopping"; exit 0' TERM
if [ "$svc" = gateway ]; then
  python3 -m http.server --bind 127.0.0.1 --directory "$FAKE_WWW" "$WAKELINE_HTTP_PORT" & child=$!
else
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


def test_supervised_services_restart_after_kill9_and_down_leaves_other_processes_alone(tmp_path):
    fake = tmp_path / ".venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "healthz").write_text("ok")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAKELINE_")}
    env.update(WAKELINE_ROOT=str(tmp_path), WAKELINE_HTTP_PORT=str(free_port()), FAKE_WWW=str(tmp_path / "www"))
    run = tmp_path / ".data" / "run"

    def services(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(ROOT / "deploy" / "services.sh"), command], env=env,
                              capture_output=True, text=True, timeout=60)

    # a process of the same checkout that services.sh did not start (as the e2e tests' are)
    bystander = subprocess.Popen([str(fake), "-m", "wakeline_runner"], env=env, stdout=subprocess.DEVNULL,
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
