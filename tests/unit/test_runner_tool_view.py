"""What a tool is shown of its host: its work dir at /work and opaque session directories.
Pure: nothing here runs a sandbox."""

from __future__ import annotations

import os
from pathlib import Path

from wakeline_runner.bwrap import bwrap_options
from wakeline_runner.isolation import tool_env
from wakeline_runner.session_dirs import session_dir
from wakeline_runner.tool_etc import write_identity_files
from wakeline_runner.tool_view import WORK_MOUNT, session_key
from wakeline_runner.wrapper import with_bwrap_options

TENANT, SESSION = "acme-corp", "sess-0042"
ROOT = Path("/srv/deploy/.data/sandboxes")


def test_a_sessions_directory_names_neither_its_tenant_nor_its_session() -> None:
    path = session_dir(ROOT, TENANT, SESSION)
    assert path.parent == ROOT / ".sessions" and path.name == session_key(TENANT, SESSION)
    assert TENANT not in str(path) and SESSION not in str(path)
    assert session_key(TENANT, SESSION) != session_key(TENANT, "sess-0043")


def test_bubblewrap_mounts_the_work_dir_at_the_neutral_path_and_starts_there() -> None:
    work = session_dir(ROOT, TENANT, SESSION) / "work"
    argv = bwrap_options(work, Path("/sys-etc"), work.parent / "etc", 1 << 20, privileged=True)
    bind = argv.index("--bind")
    assert argv[bind + 1:bind + 3] == [str(work), WORK_MOUNT]
    assert argv[argv.index("--chdir") + 1] == WORK_MOUNT
    # the host paths appear only as bind sources, never as places inside the sandbox
    sources = [i for i, arg in enumerate(argv) if str(ROOT) in arg]
    assert len(sources) == 3  # the work dir, the session's passwd and group
    assert all(argv[i - 1] in ("--bind", "--ro-bind") and str(ROOT) not in argv[i + 1] for i in sources)


def test_bubblewraps_options_reach_it_through_a_descriptor_not_its_command_line() -> None:
    # bwrap stays as the sandbox's pid 1, whose command line every tool can read
    options = ["--bind", f"{ROOT}/x/work", WORK_MOUNT, "--chdir", WORK_MOUNT]
    argv, fd = with_bwrap_options(["bwrap", "--", "bash", "-c", "pwd"], options)
    try:
        assert argv == ["bwrap", "--args", str(fd), "--", "bash", "-c", "pwd"]
        assert os.read(fd, 1 << 16) == b"\0".join(o.encode() for o in options) + b"\0"
    finally:
        os.close(fd)


def test_home_and_the_passwd_entry_name_the_work_dir_as_the_tool_sees_it(tmp_path: Path) -> None:
    assert tool_env(WORK_MOUNT)["HOME"] == WORK_MOUNT
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "passwd").write_text(f"session:x:1:1:wakeline session:{tmp_path}/work:/bin/bash\n")  # an older runner's
    write_identity_files(etc, (200_001, 200_001), WORK_MOUNT)
    assert "session:x:200001:200001:wakeline session:/work:/bin/bash" in (etc / "passwd").read_text()
    assert str(tmp_path) not in (etc / "passwd").read_text()

