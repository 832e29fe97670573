"""What a tool is shown of its host: its work dir at /work, opaque session directories, and
runner messages with the sandboxes' paths masked. Pure: nothing here runs a sandbox (the
integration test `test_runner_tool_view.py` does)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wakeline.contract.commands import ToolCallRequest
from wakeline_runner import files
from wakeline_runner.bwrap import bwrap_options
from wakeline_runner.executor import Executor
from wakeline_runner.isolation import Isolation, tool_env
from wakeline_runner.sandbox import Sandbox
from wakeline_runner.session_dirs import session_dir
from wakeline_runner.settings import RunnerSettings
from wakeline_runner.tool_etc import write_identity_files
from wakeline_runner.tool_view import WORK_MOUNT, exposed_path, masked, session_key
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


def test_masking_shows_the_work_dir_where_the_tool_sees_it_and_hides_the_rest() -> None:
    work = session_dir(ROOT, TENANT, SESSION) / "work"
    text = (f"[Errno 2] No such file or directory: '{work}/a.txt'; also {work.parent}/calls/x.json "
            f"and {ROOT}/.etc/abc and {ROOT}")
    shown = masked(text, ROOT, work, WORK_MOUNT)
    assert shown == ("[Errno 2] No such file or directory: '/work/a.txt'; also <session dir>/calls/x.json "
                     "and <sandbox root>/.etc/abc and <sandbox root>")
    assert masked(f"at {work}/x", ROOT) == f"at <sandbox root>/.sessions/{work.parent.name}/work/x"
    # unsandboxed, a tool runs at the host path: that is what it sees, and it stays
    assert masked(f"at {work}/x", ROOT, work, str(work)) == f"at {work}/x"


MOUNTINFO = """\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 22 0:40 / /srv/deploy/.data/sandboxes rw,relatime - tmpfs tmpfs rw
31 22 8:1 /volumes/wl\\040data/_data /mnt/sandboxes rw - ext4 /dev/sdb rw
"""


@pytest.mark.parametrize("path, shown", [
    (Path("/work/main/.data/sandboxes"), "/work/main/.data/sandboxes"),  # on the root filesystem: all of it
    (ROOT, "/"),  # the root of its own filesystem: nothing
    (ROOT / ".sessions" / "k" / "work", "/.sessions/k/work"),
    (Path("/mnt/sandboxes/x"), "/volumes/wl data/_data/x"),  # a volume: where the volume is on its disk
])
def test_what_a_tools_mount_table_shows_of_a_path(path: Path, shown: str) -> None:
    assert exposed_path(MOUNTINFO, path) == shown


class _Failing:
    def __init__(self, message: str):
        self.message = message

    def __call__(self, *args, **kwargs):
        raise OSError(2, "No such file or directory", self.message)


async def test_a_runner_error_naming_host_paths_reaches_the_tool_masked(tmp_path: Path, monkeypatch) -> None:
    settings = RunnerSettings(sandbox_root=tmp_path / "sandboxes", host="runner-test")
    isolation = Isolation(True, None, settings.tmp_bytes, "unit test: file tools only")
    executor = Executor(settings, Sandbox(settings, isolation))
    work = session_dir(settings.sandbox_root, TENANT, SESSION) / "work"
    monkeypatch.setattr(files, "read_file", _Failing(f"{work}/notes.md"))
    request = ToolCallRequest(session_id=SESSION, tenant=TENANT, tool_call_id="tc-1", name="read_file",
                              input={"path": "notes.md"}, causation_seq=3)
    report = await executor.execute(request)
    assert report.error_kind == "crashed"
    assert "/work/notes.md" in report.output
    for secret in (str(settings.sandbox_root), TENANT, SESSION):
        assert secret not in report.output
