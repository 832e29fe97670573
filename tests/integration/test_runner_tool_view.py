"""A tool sees its work dir at /work and nothing that names its tenant, its session or where
the deployment keeps its sandboxes, on the real runner (real broker, bubblewrap, per-session
uids and control groups).

Each test runs a runner in-process through the `harness` fixture with a fresh tenant and
session id, and looks for them, and for the host's sandbox root, in everything a tool can
print: its working directory, environment, control groups, mount table, pid 1's command
line, passwd, and the file tools' results and errors. A sandbox root that is the root of
its own filesystem hides even its own path (`own_filesystem`); on a plain directory the
mount table shows that path, never the names, and the runner says so at start.
"""

from __future__ import annotations

import json
import logging
import subprocess
import uuid
from pathlib import Path

import pytest

from runner_harness import Harness
from tests.requirements import missing
from wakeline_runner.tool_view import WORK_MOUNT

pytestmark = pytest.mark.kafka
# Everything a tool can read that could name its tenant, session or host paths.
LOOK_AROUND = ("pwd; echo HOME=$HOME; cd ~ && pwd; echo ---env; env; echo ---cgroup; cat /proc/self/cgroup; "
               "echo ---mountinfo; cat /proc/self/mountinfo; echo ---cmdline; "
               "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; tr '\\0' ' ' < $p/environ; echo; "
               "readlink $p/cwd $p/root; done 2>/dev/null; echo ---passwd; cat /etc/passwd; echo ---root; ls -a /")


@pytest.fixture
def own_filesystem(tmp_path: Path):
    """The harness's sandbox root as the root of a filesystem of its own (a tmpfs here; a
    volume in a deployment)."""
    root = tmp_path / "sandboxes"
    root.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1g,mode=0711", "wakeline-test", str(root)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        missing(f"cannot mount a tmpfs at the sandbox root (the runner's tests run as root): {done.stderr}")
    yield root
    subprocess.run(["umount", "--lazy", str(root)], check=True)


def fresh_names() -> tuple[str, str]:
    return f"tenant-{uuid.uuid4().hex[:12]}", f"sess-{uuid.uuid4().hex[:12]}"


async def tool(harness: Harness, tenant: str, session_id: str, name: str, tool_input: dict) -> dict:
    request, _ = await harness.call(session_id, "", name=name, tool_input=tool_input, tenant=tenant)
    report = await harness.result(request)
    return {"is_error": report.is_error, "error_kind": report.error_kind, "raw": report.output,
            **json.loads(report.output)}


def sections(stdout: str) -> dict[str, str]:
    head, *rest = stdout.split("\n---")
    parts = {"start": head}
    for part in rest:
        name, _, body = part.partition("\n")
        parts[name] = body
    return parts


async def test_a_tool_sees_its_work_dir_at_work_and_no_name_or_host_path(harness: Harness, own_filesystem) -> None:
    tenant, session = fresh_names()
    hidden = (tenant, session, str(own_filesystem), str(harness.tmp_path))
    async with harness.runner_running() as runner:
        seen = await tool(harness, tenant, session, "bash", {"command": LOOK_AROUND})
        written = await tool(harness, tenant, session, "write_file", {"path": "/work/notes/a.txt", "content": "hi\n"})
        await tool(harness, tenant, session, "bash", {"command": "ln -s /work/notes/a.txt link; ln -s notes rel; "
                                                                 "ln -s /etc/hostname out; echo keep > ~/MEMORY.md"})
        by_link = await tool(harness, tenant, session, "read_file", {"path": "link"})
        relative = await tool(harness, tenant, session, "read_file", {"path": "rel/a.txt"})
        memory = await tool(harness, tenant, session, "read_file", {"path": "MEMORY.md", "max_bytes": 262144})
        catted = await tool(harness, tenant, session, "bash", {"command": "cat /work/notes/a.txt ~/link"})
        listed = await tool(harness, tenant, session, "list_files", {"recursive": True})
        escapes = [await tool(harness, tenant, session, "read_file", {"path": path})
                   for path in ("../../../etc/hostname", "/etc/hostname", "out")]
        not_there = await tool(harness, tenant, session, "read_file", {"path": "nope/a.txt"})
        assert not runner.done()
    shown = sections(seen["stdout"])
    assert shown["start"].splitlines() == [WORK_MOUNT, f"HOME={WORK_MOUNT}", WORK_MOUNT]
    assert f"PWD={WORK_MOUNT}" in shown["env"]
    assert f" {WORK_MOUNT} " in shown["mountinfo"] and "bwrap --args" in shown["cmdline"]
    assert f"wakeline session:{WORK_MOUNT}:" in shown["passwd"] and "work" in shown["root"].split()
    assert (written["path"], by_link["content"], relative["path"]) == ("notes/a.txt", "hi\n", "notes/a.txt")
    assert (memory["path"], memory["content"]) == ("MEMORY.md", "keep\n")
    assert catted["stdout"] == "hi\nhi\n"
    assert {e["path"] for e in listed["entries"]} == {"notes", "notes/a.txt", "link", "rel", "out", "MEMORY.md"}
    assert [e["error_kind"] for e in escapes] == ["path_escape"] * 3
    assert all(e["message"].endswith(f"work directory, {WORK_MOUNT}") for e in escapes)
    assert not_there["error_kind"] == "not_found"
    for result in (seen, written, by_link, relative, memory, catted, listed, *escapes, not_there):
        for name in hidden:
            assert name not in result["raw"], (name, result["raw"][:2000])


async def test_on_a_plain_directory_the_mount_table_shows_the_sandbox_root_but_no_name(harness: Harness,
                                                                                      caplog) -> None:
    tenant, session = fresh_names()
    root = harness.tmp_path / "sandboxes"
    with caplog.at_level(logging.INFO, logger="wakeline_runner.isolation"):
        async with harness.runner_running():
            seen = await tool(harness, tenant, session, "bash", {"command": LOOK_AROUND})
    assert seen["stdout"].startswith(f"{WORK_MOUNT}\n")
    assert tenant not in seen["raw"] and session not in seen["raw"]
    shown = sections(seen["stdout"])
    assert f"{root}/.sessions/" in shown["mountinfo"]  # the path shows, under an opaque key ...
    assert str(root) not in shown["mountinfo"].replace(f"{root}/.sessions/", "").replace(f"{root}/.etc/", "")
    assert all(str(root) not in text for name, text in shown.items() if name != "mountinfo")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("mount a filesystem at" in m and str(root) in m for m in warned)  # ... and the runner said so


async def test_unsandboxed_a_tool_runs_at_its_host_path_which_names_neither_tenant_nor_session(
        harness: Harness) -> None:
    tenant, session = fresh_names()
    async with harness.runner_running(use_bwrap="off"):
        seen = await tool(harness, tenant, session, "bash", {"command": "pwd; echo HOME=$HOME; echo hi > a.txt"})
        work = seen["stdout"].splitlines()[0]
        by_host_path = await tool(harness, tenant, session, "read_file", {"path": f"{work}/a.txt"})
        by_mount = await tool(harness, tenant, session, "read_file", {"path": f"{WORK_MOUNT}/a.txt"})
    assert work == str(harness.work(session, tenant)) and seen["stdout"].splitlines()[1] == f"HOME={work}"
    assert tenant not in work and session not in work
    assert (by_host_path["content"], by_host_path["path"]) == ("hi\n", "a.txt")
    assert by_mount["error_kind"] == "path_escape"  # no /work without the sandbox's mount
