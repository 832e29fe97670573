"""Runners started together on one host: each probes bubblewrap in a directory of its own.

With one fixed probe directory, two runners starting at once removed each other's probe
file and one refused to start, blaming bubblewrap (issue 37). Here six processes probe the
same sandbox root at the same moment, five times each: every probe must pass and leave
nothing behind. A probe whose checks fail inside a sandbox that did start says so, not
"install bubblewrap".
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.requirements import require
from wakeline_runner.bwrap_probe import INSTALL, _probe_in
from wakeline_runner.isolation import Isolation, tool_env
from wakeline_runner.tool_view import WORK_MOUNT

PROBE = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from wakeline_runner.isolation import probe
    from wakeline_runner.settings import RunnerSettings
    start = float(sys.argv[2])
    time.sleep(max(0.0, start - time.time()))  # all at once
    for _ in range(5):
        probe(RunnerSettings(sandbox_root=Path(sys.argv[1])))
    print("ok")
""")


def bwrap_available() -> None:
    require(subprocess.run(["sh", "-c", "command -v bwrap"], capture_output=True).returncode == 0,
            "bwrap is not installed (deploy/system-deps.sh installs it)")


def test_six_runners_probing_one_sandbox_root_at_once_all_start(tmp_path: Path) -> None:
    bwrap_available()
    start = time.time() + 2.0
    procs = [subprocess.Popen([sys.executable, "-c", PROBE, str(tmp_path), str(start)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(6)]
    outcomes = [p.communicate(timeout=240) for p in procs]
    failed = [err.strip().splitlines()[-1] for (out, err), p in zip(outcomes, procs) if p.returncode != 0]
    assert failed == [], failed
    assert all(out.strip() == "ok" for out, _ in outcomes)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".probe")) == []


def test_a_probe_whose_checks_fail_inside_the_sandbox_does_not_blame_bubblewrap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bwrap_available()
    from wakeline_runner import bwrap_probe
    from wakeline_runner.tool_etc import build_system_etc
    monkeypatch.setattr(bwrap_probe, "CHECKS", "test -e /no-such-place")
    candidate = Isolation(True, None, 16 << 20, "probe", build_system_etc(tmp_path))
    (tmp_path / "p").mkdir()
    said = _probe_in(tmp_path / "p", candidate, tool_env(WORK_MOUNT))
    assert said is not None and "the probe's checks failed inside the sandbox" in said and INSTALL not in said
