"""`Sandbox.open_session`: a session's directories are made on its first call and only
checked after; what went missing is made again and a work dir with another owner is
handed back, so a call never runs where the session's directories are not."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from runner_harness import BWRAP_MODES, sandbox_settings
from wakeline_runner.isolation import probe
from wakeline_runner.sandbox import Sandbox
from wakeline_runner.session_dirs import session_dir
from wakeline_runner.settings import RunnerSettings


@pytest.fixture(**BWRAP_MODES)
def sandbox(tmp_path: Path, request):
    settings: RunnerSettings = sandbox_settings(tmp_path, request.param)
    sandbox = Sandbox(settings, probe(settings))
    yield sandbox
    sandbox.close()


def test_a_known_session_is_checked_not_made_again_and_what_went_missing_is_made_again(sandbox: Sandbox) -> None:
    session = str(uuid.uuid4())
    first = sandbox.open_session("default", session)
    (first.work / "kept.txt").write_text("x")
    assert sandbox.open_session("default", session) is first  # the fast path: the same dirs, nothing made
    assert (first.work / "kept.txt").read_text() == "x"

    shutil.rmtree(first.work)  # gone (an operator, or a tool that could reach it)
    again = sandbox.open_session("default", session)
    assert again.work.is_dir() and oct(again.work.stat().st_mode & 0o777) == oct(0o700)
    if again.owner is not None:
        assert again.work.stat().st_uid == again.owner[0]

    shutil.rmtree(again.calls)
    assert sandbox.open_session("default", session).calls.is_dir()


def test_another_owner_of_the_work_dir_is_handed_back(sandbox: Sandbox) -> None:
    session = str(uuid.uuid4())
    dirs = sandbox.open_session("default", session)
    if dirs.owner is None or os.geteuid() != 0:
        pytest.skip("per-session uids need a root runner")  # the CI machine runs as root: never skipped there
    os.chown(dirs.work, 0, 0)
    assert sandbox.open_session("default", session).work.stat().st_uid == dirs.owner[0]


def test_a_sandbox_made_before_opaque_names_is_kept_where_it_is(sandbox: Sandbox, caplog) -> None:
    # Moving it could pull it from under a call still running in it; its files must not vanish.
    session = str(uuid.uuid4())
    named = sandbox.settings.sandbox_root / "default" / session
    (named / "work").mkdir(parents=True)
    (named / "work" / "old.txt").write_text("kept")
    dirs = sandbox.open_session("default", session)
    assert dirs.work == named / "work" and (dirs.work / "old.txt").read_text() == "kept"
    assert any("made before sandboxes had opaque names" in r.getMessage() for r in caplog.records)
    if sandbox.isolation.use_bwrap:  # its tools' passwd names the work dir where they see it
        assert ":/work:" in (dirs.etc / "passwd").read_text()


def test_a_new_sessions_directories_are_named_by_neither_tenant_nor_session(sandbox: Sandbox) -> None:
    session = f"sess-{uuid.uuid4().hex}"
    dirs = sandbox.open_session("tenant-visible", session)
    assert dirs.work == session_dir(sandbox.settings.sandbox_root, "tenant-visible", session) / "work"
    assert "tenant-visible" not in str(dirs.work) and session not in str(dirs.work)
    assert not (sandbox.settings.sandbox_root / "tenant-visible").exists()
