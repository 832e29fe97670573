"""The wheel, installed outside the checkout, migrates a fresh database, creates topics and
runs every service, against the real broker and Postgres.

The wheel is built from the tree (`pip wheel`) and installed with `--no-deps` into a new
venv under the test's tmp dir. Its third-party dependencies are only those that
[project].dependencies pulls in: resolved from the checkout venv's installed metadata
(tests/packaging.runtime_distributions, no index asked), their files symlinked into a
directory of their own, which one path line in a .pth file of the new venv puts on
sys.path. Nothing of `[test]` is there, so a runtime import missing from the dependencies
fails here: every module of the wheel is imported in that venv before anything runs. Every
wakeline module the commands run is the wheel's: asserted by where each package is imported
from. The commands run with the checkout out of reach: working directory in the tmp dir, no
PYTHONPATH, only the credentials file (an operator's secret, not code) read from the
checkout's .data.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

import asyncpg
import pytest

from tests.e2e.stack import free_port, require_database
from tests.packaging import SETUPTOOLS, link_distributions, runtime_distributions, tree_packages
from wakeline.transport.kafka_io import make_admin
from wakeline.runtime.settings import AdminSettings, CommonSettings, credentials_file
from wakeline.contract.topics import names

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("archiver", "runner", "brain", "gateway")
# Where the stack is, and the runner's machine-wide ranges (two clones on one machine).
PASSED_ON = ("WAKELINE_KAFKA_BOOTSTRAP", "WAKELINE_POSTGRES_DSN", "WAKELINE_POSTGRES_ADMIN_DSN",
             "WAKELINE_KAFKA_PORT", "WAKELINE_PG_PORT",
             "WAKELINE_CGROUP_PARENT", "WAKELINE_SANDBOX_UID_BASE", "WAKELINE_SANDBOX_UID_COUNT")


def build_wheel(out: Path) -> Path:
    """From a copy of what the Dockerfile copies: setuptools keeps a build/ dir in the tree it
    builds in, whose stale files would end up in the wheel and hide a package left out."""
    source = out / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")
    for part in ("libs", "services"):
        shutil.copytree(ROOT / part, source / part, ignore=ignore)
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / part, source / part)
    shutil.copytree(ROOT / "clients" / "python", source / "clients" / "python", ignore=ignore)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--wheel-dir", str(out),
                            str(source), str(source / "clients" / "python")],
                           capture_output=True, text=True, timeout=600, cwd=out)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = out.glob("wakeline-0*.whl")
    return wheel


def client_wheel(out: Path) -> Path:
    """The `wakeline` command's HTTP client: a package of its own (clients/python), built beside."""
    (wheel,) = out.glob("wakeline_client-*.whl")
    return wheel


def check_wheel_contents(wheel: Path) -> None:
    """Every module of every package in the tree, every migration and policy, the scripts."""
    with zipfile.ZipFile(wheel) as archive:
        members = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in members if n.endswith("entry_points.txt"))
    wanted = []
    for package in tree_packages():
        top, *rest = package.split(".")
        directory = ROOT / SETUPTOOLS["package-dir"][top] / Path(*rest)
        wanted += [f"{package.replace('.', '/')}/{p.name}" for p in directory.glob("*.py")]
    wanted += [f"wakeline/storage/migrations/{p.name}"
               for p in (ROOT / "libs" / "wakeline" / "storage" / "migrations").glob("*.sql")]
    wanted += [f"wakeline_brain/policies/{p.name}" for p in (ROOT / "services" / "brain" / "policies").glob("*.json")]
    console = [p for p in (ROOT / "services" / "gateway" / "console").iterdir() if p.suffix in (".html", ".js", ".css")]
    assert {p.suffix for p in console} == {".html", ".js", ".css"}
    wanted += [f"wakeline_gateway/console/{p.name}" for p in console]
    assert "wakeline_gateway/routes/commands.py" in wanted
    assert sorted(set(wanted) - members) == []
    for script in ("wakeline", "wakeline-replay-check", *(f"wakeline-{s}" for s in SERVICES)):
        assert f"\n{script} = " in f"\n{entry_points}", script


def make_venv(where: Path, wheel: Path) -> Path:
    """A venv with the wheel and, on its path, a directory of only the runtime dependencies."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    bin_dir = where / "bin"
    site = next((where / "lib").glob("python3*/site-packages"))
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "-q",
                                "--no-deps", "--no-index", str(wheel), str(client_wheel(wheel.parent))],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    dependencies = where.parent / "runtime-dependencies"
    # The client is the wheel's sibling, installed above; the checkout's is an editable path hook.
    runtime = {name: dist for name, dist in runtime_distributions().items() if name != "wakeline-client"}
    assert "pyyaml" not in runtime and "pytest" not in runtime  # [test] stays out
    assert link_distributions(runtime, dependencies) > 1000
    (site / "zz_runtime_dependencies.pth").write_text(f"{dependencies}\n")
    return bin_dir


# Imports each module named on stdin in this venv; prints the ones that fail, with why.
IMPORT_EACH = """
import importlib, sys
failed = []
for name in sys.stdin.read().split():
    try:
        importlib.import_module(name)
    except BaseException as err:
        failed.append(f"{name}: {type(err).__name__}: {err}")
print("\\n".join(failed))
"""


def wheel_modules(wheel: Path, packages: tuple[str, ...] = tuple(SETUPTOOLS["package-dir"])) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        paths = [n for n in archive.namelist() if n.endswith(".py") and n.split("/")[0] in packages]
    return sorted(p[:-3].removesuffix("/__init__").replace("/", ".") for p in paths)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(the wheel, its venv's bin dir, the venv's root), built once for this module's tests."""
    root = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(root / "dist")
    check_wheel_contents(wheel)
    return wheel, make_venv(root / "venv", wheel), root / "venv"


def test_every_module_of_the_wheel_imports_with_only_the_runtime_dependencies(installed, tmp_path):
    """A runtime import that only `[test]` brings (yaml, say) passes in the checkout and fails
    here; so does a module that needs the checkout's tree. Imported in a fresh process, cwd
    outside the checkout."""
    wheel, bin_dir, _ = installed
    modules = wheel_modules(wheel) + wheel_modules(client_wheel(wheel.parent), ("wakeline_client",))
    assert "wakeline_gateway.routes.commands" in modules and "wakeline.runtime.tracing" in modules
    assert "wakeline_client._sync.harness" in modules
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    imported = subprocess.run([str(bin_dir / "python"), "-c", IMPORT_EACH], input="\n".join(modules),
                              capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == ""
    # the check bites: a module of [test] alone is not importable there
    refused = subprocess.run([str(bin_dir / "python"), "-c", IMPORT_EACH], input="yaml\npytest",
                             capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert refused.stdout.splitlines() == ["yaml: ModuleNotFoundError: No module named 'yaml'",
                                           "pytest: ModuleNotFoundError: No module named 'pytest'"], refused.stdout


def new_database(name: str) -> None:
    made = subprocess.run(["bash", str(ROOT / "deploy" / "postgres" / "pg.sh"), "up"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "WAKELINE_POSTGRES_DATABASE": name})
    assert made.returncode == 0, made.stdout + made.stderr


async def drop_database(name: str) -> None:
    conn = await asyncpg.connect(AdminSettings().postgres_admin_dsn)  # another database of the same owner
    try:
        # The services have exited, but a backend of theirs may still be ending; FORCE as the
        # owner may not terminate another role's backend (seen once: InsufficientPrivilegeError),
        # so wait for them to go first.
        for _ in range(150):
            if not await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE datname = $1", name):
                break
            await asyncio.sleep(0.1)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def delete_topics(prefix: str) -> None:
    admin = make_admin(CommonSettings())
    await admin.start()
    try:
        await admin.delete_topics(list(names(prefix).all_topics))
    finally:
        await admin.close()


def test_the_wheel_installed_outside_the_checkout_migrates_creates_topics_and_runs_a_session(installed, tmp_path):
    require_database()
    _, bin_dir, venv = installed
    home = tmp_path / "operator"
    home.mkdir()
    run_id = uuid.uuid4().hex[:8]
    database, prefix, port = f"wakeline_wheel_{run_id}", f"wakeline-wheel-{run_id}", free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAKELINE_") and k != "PYTHONPATH"}
    env.update({k: os.environ[k] for k in PASSED_ON if k in os.environ})
    env.update(WAKELINE_CREDENTIALS_FILE=str(credentials_file()), WAKELINE_POSTGRES_DATABASE=database,
               WAKELINE_TOPIC_PREFIX=prefix, WAKELINE_PARTITIONS="2", WAKELINE_HTTP_PORT=str(port),
               WAKELINE_GATEWAY_URL=f"http://127.0.0.1:{port}", WAKELINE_SANDBOX_ROOT=str(home / "sandboxes"),
               WAKELINE_ARCHIVER_DATA_DIR=str(home / "archiver"))

    def wakeline(*args: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(bin_dir / "wakeline"), *args], capture_output=True, text=True, timeout=timeout,
                              cwd=home, env={**env, **extra})

    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import wakeline, wakeline_brain, wakeline_runner, wakeline_archiver, "
         "wakeline_gateway.routes as r, wakeline.storage.migrate as m, wakeline_client as c; print(wakeline.__file__, "
         "wakeline_brain.__file__, wakeline_runner.__file__, wakeline_archiver.__file__, r.__file__, m.MIGRATIONS_DIR, "
         "c.__file__)"],
        capture_output=True, text=True, cwd=home, env=env, timeout=60)
    assert where.returncode == 0, where.stderr
    assert all(p.startswith(str(venv)) for p in where.stdout.split()), where.stdout

    processes: dict[str, subprocess.Popen] = {}
    new_database(database)
    try:
        migrated = wakeline("migrate")
        assert migrated.returncode == 0, migrated.stdout + migrated.stderr
        labels = sorted(p.stem for p in (ROOT / "libs" / "wakeline" / "storage" / "migrations").glob("*.sql"))
        assert [line.rsplit(" ", 1)[1] for line in migrated.stdout.splitlines()] == labels, migrated.stdout
        for command in ("topics", "acls"):
            done = wakeline(command)
            assert done.returncode == 0, done.stdout + done.stderr
        assert f"'{prefix}.events'" in wakeline("topics").stdout or "all present" in wakeline("topics").stdout

        for service in SERVICES:
            log = open(home / f"{service}.log", "wb")
            processes[service] = subprocess.Popen([str(bin_dir / f"wakeline-{service}")], cwd=home,
                                                  env={**env, "WAKELINE_HOST": f"wheel-{service}"}, stdout=log,
                                                  stderr=subprocess.STDOUT, start_new_session=True)
        key = wakeline("keys", "create", "--tenant", "default", "--principal", "wheel", "--role", "user")
        assert key.returncode == 0, key.stderr
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # the gateway answers once it listens
            if wakeline("sessions", WAKELINE_API_KEY=key.stdout.strip()).returncode == 0:
                break
            time.sleep(0.5)
        # the scripted demo policy is the wheel's package data; its tools run in the runner's sandbox
        ran = wakeline("run", "count the words", "--model", "scripted:demo", timeout=240,
                       WAKELINE_API_KEY=key.stdout.strip())
        logs = "\n".join(f"--- {s}\n{(home / f'{s}.log').read_text()[-3000:]}" for s in SERVICES)
        assert ran.returncode == 0, ran.stdout + ran.stderr + logs
        assert "completed" in ran.stdout + ran.stderr
        assert all(p.poll() is None for p in processes.values()), logs

        # the operator's checks straight from Postgres, as the wheel installs them
        (session_id,) = re.findall(r"session ([0-9a-f-]{36})", ran.stderr)
        # The chains only: signed checkpoints need the signer's key, whose statements would stay
        # in the suite's database and topic for later runs (tests/integration/test_evidence.py
        # signs in tenants of its own); the wheel's signer is checked to make its key below.
        verified = wakeline("verify-direct", session_id, "--tenant", "default", "--without-signed-checkpoints")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        report = json.loads(verified.stdout.splitlines()[0])
        assert (report["session_id"], report["ok"], report["found"]) == (session_id, True, True), report
        assert report["events"] > 5, report
        replayed = subprocess.run([str(bin_dir / "wakeline-replay-check"), session_id, "--tenant", "default"],
                                  capture_output=True, text=True, timeout=120, cwd=home, env=env)
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        assert replayed.stdout.startswith(f"{session_id}: replays cleanly ("), replayed.stdout
        keygen = subprocess.run([str(bin_dir / "wakeline-signer"), "keygen"], capture_output=True, text=True,
                                timeout=60, cwd=home, env=env)
        assert keygen.returncode == 0, keygen.stdout + keygen.stderr
        assert '"fingerprint": "sha256:' in keygen.stdout and (home / ".data/signer/signer.key.pub").is_file()
    finally:
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        asyncio.run(drop_database(database))
        asyncio.run(delete_topics(prefix))


@pytest.mark.parametrize("package", ["wakeline.storage", "wakeline_brain"])
def test_package_data_is_read_through_importlib_resources(package):
    """Not the source tree: the migrations and policies are found wherever the package is."""
    from importlib.resources import files

    data = {"wakeline.storage": "migrations", "wakeline_brain": "policies"}[package]
    assert any(files(package).joinpath(data).iterdir())
