"""The services as separate OS processes, for end-to-end tests: start, kill -9, restart.

Each process gets its own log under the run's directory; a test that fails prints the
tails so the reader sees what each service said. `running_stack` starts all four and
waits until a session goes through; talking to them is `tests.e2e.sessions`' job.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from tests.e2e.sessions import warm_up
from tests.private_broker import environ
from tests.requirements import missing
from wakeline.storage.migrate import apply_migrations
from wakeline.runtime.settings import AdminSettings, CommonSettings
from wakeline_runner.session_dirs import session_dir

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
SERVICES = ("archiver", "runner", "brain", "gateway")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Service:
    name: str
    module: str
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen | None = None
    metrics_port: int = 0  # where its /metrics answers (each process its own free port)

    def start(self) -> "Service":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log, "ab")
        self.proc = subprocess.Popen([PY, "-m", self.module], cwd=ROOT, env=self.env, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def kill9(self) -> None:
        """SIGKILL the whole process group: no shutdown code runs, as in a machine loss."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill9()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, lines: int = 30) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Stack:
    run_dir: Path
    gateway_port: int = field(default_factory=free_port)
    services: dict[str, Service] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # the API key every test client presents

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WAKELINE_")}
        env.update({
            "WAKELINE_POLICY_DIR": str(ROOT / "tests" / "e2e" / "policies"),
            "WAKELINE_SANDBOX_ROOT": str(self.run_dir / "sandboxes"),
            "WAKELINE_ARCHIVER_DATA_DIR": str(self.run_dir / "archiver"),  # not the demo archiver's
            "WAKELINE_HTTP_PORT": str(self.gateway_port),
            "WAKELINE_IDLE_EVICT_S": "60",
        })
        # Where the stack is and the names it runs under (`make test`: the suite's own topic
        # prefix and database), so the services write where this process reads.
        # The runner's cgroup parent and uid range are machine-wide: a second clone sets its own.
        for key in ("WAKELINE_KAFKA_BOOTSTRAP", "WAKELINE_POSTGRES_DSN", "WAKELINE_KAFKA_PORT", "WAKELINE_PG_PORT",
                    "WAKELINE_PARTITIONS",
                    "WAKELINE_TOPIC_PREFIX", "WAKELINE_POSTGRES_DATABASE", "WAKELINE_CGROUP_PARENT",
                    "WAKELINE_SANDBOX_UID_BASE", "WAKELINE_SANDBOX_UID_COUNT"):
            if key in os.environ:
                env[key] = os.environ[key]
        env.update(extra)
        return env

    def start(self, name: str, kind: str | None = None, **extra: str) -> Service:
        kind = kind or name
        port = free_port()
        service = Service(name, f"wakeline_{kind}",
                          self.env(**{"WAKELINE_HOST": name, "WAKELINE_METRICS_PORT": str(port), **extra}),
                          self.run_dir / "logs" / f"{name}.log", metrics_port=port).start()
        self.services[name] = service
        return service

    def wait_gateway(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.gateway_port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"gateway did not listen within {timeout}s:\n{self.services['gateway'].tail()}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}"

    def api_key(self, principal: str = "local", role: str = "user", tenant: str = "default") -> str:
        """A real key, made by `wakeline keys create` exactly as an operator would."""
        env = {k: v for k, v in os.environ.items() if k != "WAKELINE_API_KEY"}
        made = subprocess.run([str(ROOT / ".venv" / "bin" / "wakeline"), "keys", "create", "--tenant", tenant,
                               "--principal", principal, "--role", role],
                              capture_output=True, text=True, env=env, timeout=60)
        assert made.returncode == 0, made.stderr
        return made.stdout.strip()

    def stop_all(self) -> None:
        for service in self.services.values():
            service.stop()

    def report(self) -> str:
        return "\n".join(f"--- {n} ({'alive' if s.alive else 'dead'})\n{s.tail()}" for n, s in self.services.items())


def require_database() -> None:
    """The stack's processes need the database (and so `make up`); skip, or fail under CI."""
    async def probe() -> None:
        conn = await asyncpg.connect(CommonSettings().postgres_dsn, timeout=5)
        await conn.close()
    try:
        asyncio.run(probe())
    except Exception as err:  # noqa: BLE001 - any failure means "not there"
        missing(f"Postgres unreachable: {err!r}; run `make up` first (make test does)")


@contextmanager
def own_database(prefix: str) -> Iterator[str]:
    """A database of the block's own, made as `make up` makes one (`pg.sh up` bootstraps it,
    then every migration), dropped afterwards; settings built inside the block use it.

    For a module whose private broker reuses the suite's topic names: the archive keys a
    dead letter by its topic, partition and offset, so a row stored from the private
    broker's offsets stands in for the suite's own later letter at the same position, which
    is then never stored (seen: test_failure_isolation waiting for a dead letter after
    test_stray_transaction had run in the same database)."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["bash", str(ROOT / "deploy/postgres/pg.sh"), "up"], capture_output=True, text=True,
                          env={**os.environ, "WAKELINE_POSTGRES_DATABASE": name}, timeout=300)
    if made.returncode != 0:
        missing(f"pg.sh up could not make database {name}: {made.stdout}{made.stderr}")
    try:
        with environ(WAKELINE_POSTGRES_DATABASE=name):
            asyncio.run(apply_migrations(AdminSettings().postgres_admin_dsn))
            yield name
    finally:
        asyncio.run(_drop_database(name))


async def _drop_database(name: str) -> None:
    """As the cluster's superuser over its unix socket (root maps to postgres)."""
    status = subprocess.run(["bash", str(ROOT / "deploy/postgres/pg.sh"), "status"], capture_output=True, text=True)
    fields = dict(line.split("=", 1) for line in status.stdout.splitlines() if "=" in line)
    conn = await asyncpg.connect(host=fields["socket_dir"], port=int(fields["port"]), user="postgres",
                                 database="postgres", timeout=10)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@contextmanager
def running_stack(run_dir: Path, **extra: str) -> Iterator[Stack]:
    """The four services (with `extra` environment), a user key of user:local in tenant default,
    and one session through end to end; stopped afterwards, their log tails printed."""
    stack = Stack(run_dir)
    try:  # a failed start or warm-up must not leave processes in the consumer groups
        for name in SERVICES:
            stack.start(name, **extra)
        stack.wait_gateway()
        stack.headers = {"Authorization": f"Bearer {stack.api_key()}"}
        warm_up(stack)
        yield stack
    finally:
        stack.stop_all()
        print(stack.report())


def sandbox_work(stack: Stack, session_id: str, tenant: str = "default") -> Path:
    """Where the runner ran a session's tools (on the host; they see it at /work)."""
    return session_dir(stack.run_dir / "sandboxes", tenant, session_id) / "work"
