"""The TypeScript client (clients/typescript) against the live stack, with Node's own test runner.

`node --test clients/typescript/test/` runs its unit tests (SSE parsing, retries against a
local server, generated types up to date, `npm pack` installing offline) and, given the
gateway's URL and keys in the environment, its live ones: sessions, streams, typed errors,
and declared tools answered by the harness loop and the pool worker. Its declarations are
type-checked with the TypeScript its package-lock.json pins, installed into a temp dir.
Under CI a missing `node` or `npm` fails these tests (tests/requirements.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.requirements import missing

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
NODE_MAJOR = 18


def require_node() -> str:
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        missing("node and npm are needed for the TypeScript client's tests (Debian: apt-get install nodejs npm)")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    if int(version.lstrip("v").split(".")[0]) < NODE_MAJOR:
        missing(f"node {version} is too old for the TypeScript client: it needs {NODE_MAJOR} or later")
    return node


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    output = f"$ {' '.join(command)}\n{done.stdout}{done.stderr}"
    print(output)
    assert done.returncode == 0, output
    return output


def test_node_tests_pass_against_the_live_gateway(stack):
    node = require_node()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAKELINE_")}
    env.update({
        "WAKELINE_TEST_GATEWAY_URL": stack.url,
        "WAKELINE_TEST_API_KEY": stack.headers["Authorization"].removeprefix("Bearer "),
        "WAKELINE_TEST_SERVICE_KEY": stack.api_key("ts-pool-worker", "service"),
    })
    output = run([node, "--test", "--test-reporter=spec", "test/"], PACKAGE, env)
    assert "ℹ skipped 0" in output, "no live test may skip when the gateway is given"


def test_declarations_type_check_with_the_pinned_typescript(tmp_path):
    node = require_node()
    for name in ("package.json", "package-lock.json"):
        shutil.copy(PACKAGE / name, tmp_path / name)
    installed = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=tmp_path,
                               capture_output=True, text=True, timeout=600)
    if installed.returncode != 0:
        missing(f"npm ci could not install the pinned TypeScript (no registry?):\n{installed.stderr[-2000:]}")
    tsc = tmp_path / "node_modules" / "typescript" / "bin" / "tsc"
    run([node, str(tsc), "-p", "tsconfig.json"], PACKAGE, timeout=300)
