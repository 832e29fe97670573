"""File tools stay inside the session's work directory, symlinks and races included."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from wakeline_runner.confinement import confine
from wakeline_runner.files import list_files, read_file, write_file
from wakeline.contract.tools import ListFilesInput, ReadFileInput, WriteFileInput
from wakeline_runner.tools import ToolFailure


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "outside.txt").write_text("host secret")
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "a.txt").write_text("inside")
    return work


def _kind(call) -> str:
    with pytest.raises(ToolFailure) as caught:
        call()
    return caught.value.kind


def test_relative_and_absolute_paths_inside_resolve_to_parts(work: Path) -> None:
    assert confine(work, "sub/a.txt") == ("sub", "a.txt")
    assert confine(work, str(work / "sub" / "./a.txt")) == ("sub", "a.txt")
    assert confine(work, ".") == ()


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "/etc/passwd", "/"])
def test_paths_outside_the_work_dir_are_refused(work: Path, path: str) -> None:
    assert _kind(lambda: confine(work, path)) == "path_escape"


def test_a_symlink_pointing_outside_is_refused(work: Path) -> None:
    (work / "link").symlink_to(work.parent / "outside.txt")
    (work / "dirlink").symlink_to(work.parent)
    assert _kind(lambda: read_file(work, ReadFileInput(path="link"))) == "path_escape"
    assert _kind(lambda: read_file(work, ReadFileInput(path="dirlink/outside.txt"))) == "path_escape"
    assert _kind(lambda: write_file(work, WriteFileInput(path="link", content="x"), None)) == "path_escape"
    assert (work.parent / "outside.txt").read_text() == "host secret"


def test_a_symlink_inside_the_work_dir_is_followed(work: Path) -> None:
    (work / "alias").symlink_to(work / "sub")
    assert read_file(work, ReadFileInput(path="alias/a.txt")).content == "inside"


def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed(work: Path, monkeypatch) -> None:
    # The runner is root; a tool racing it must not turn a checked path into an escape.
    import wakeline_runner.files as files_module

    real_confine = files_module.confine

    def confine_then_swap(root, path, seen_as):
        parts = real_confine(root, path, seen_as)
        os.rename(work / "sub", work / "sub.old")
        (work / "sub").symlink_to(work.parent)
        return parts

    monkeypatch.setattr(files_module, "confine", confine_then_swap)
    assert _kind(lambda: read_file(work, ReadFileInput(path="sub/a.txt"))) == "path_escape"


def test_write_read_and_list_round_trip(work: Path) -> None:
    written = write_file(work, WriteFileInput(path="new/dir/b.txt", content="héllo"), None)
    assert written.bytes_written == len("héllo".encode())
    read = read_file(work, ReadFileInput(path="new/dir/b.txt", max_bytes=3))
    assert (read.size, read.truncated) == (6, True)
    listing = list_files(work, ListFilesInput(recursive=True))
    assert [e.path for e in listing.entries] == ["new", "new/dir", "new/dir/b.txt", "sub", "sub/a.txt"]
    assert list_files(work, ListFilesInput(recursive=True, max_entries=2)).truncated


def test_a_hard_link_is_not_written_through(work: Path) -> None:
    os.link(work.parent / "outside.txt", work / "hard")
    assert _kind(lambda: write_file(work, WriteFileInput(path="hard", content="x"), None)) == "permission_denied"
    assert (work.parent / "outside.txt").read_text() == "host secret"


def test_reading_a_fifo_fails_instead_of_hanging(work: Path) -> None:
    os.mkfifo(work / "pipe")
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(_kind(lambda: read_file(work, ReadFileInput(path="pipe")))))
    reader.start()
    reader.join(timeout=5)
    assert result == ["invalid_input"]


def test_missing_files_and_directories_are_typed(work: Path) -> None:
    assert _kind(lambda: read_file(work, ReadFileInput(path="nope.txt"))) == "not_found"
    assert _kind(lambda: read_file(work, ReadFileInput(path="sub"))) == "invalid_input"
    assert _kind(lambda: list_files(work, ListFilesInput(path="nope"))) == "not_found"
    assert _kind(lambda: write_file(work, WriteFileInput(path=".", content="x"), None)) == "invalid_input"


# The session's tools see their work dir at /work (under bubblewrap); the file tools read
# absolute paths, and absolute symlinks a tool made, as the tools do.

def test_absolute_paths_are_read_where_the_tools_see_the_work_dir(work: Path) -> None:
    assert confine(work, "/work/sub/a.txt", "/work") == ("sub", "a.txt")
    assert confine(work, "/work", "/work") == ()
    assert read_file(work, ReadFileInput(path="/work/sub/a.txt"), seen_as="/work").path == "sub/a.txt"
    assert list_files(work, ListFilesInput(path="/work/sub"), seen_as="/work").entries[0].path == "sub/a.txt"


@pytest.mark.parametrize("path", ["/workshop/a.txt", "/work/../etc/passwd", "/etc/passwd", "/", "../work/sub"])
def test_paths_that_leave_the_tools_work_dir_are_refused(work: Path, path: str) -> None:
    assert _kind(lambda: confine(work, path, "/work")) == "path_escape"


def test_the_work_dirs_host_path_means_nothing_to_a_sandboxed_tool(work: Path) -> None:
    with pytest.raises(ToolFailure) as caught:
        confine(work, str(work / "sub" / "a.txt"), "/work")
    assert caught.value.kind == "path_escape"
    assert caught.value.message.endswith("the session's work directory, /work")


def test_an_absolute_symlink_a_tool_made_is_followed_in_its_view(work: Path) -> None:
    (work / "alias").symlink_to("/work/sub")  # what `ln -s /work/sub alias` makes in the sandbox
    (work / "host").symlink_to(work / "sub")  # a host path: nothing a sandboxed tool could follow
    assert read_file(work, ReadFileInput(path="alias/a.txt"), seen_as="/work").content == "inside"
    assert confine(work, "/work/alias/../sub", "/work") == ("sub",)
    assert _kind(lambda: read_file(work, ReadFileInput(path="host/a.txt"), seen_as="/work")) == "path_escape"
    assert _kind(lambda: write_file(work, WriteFileInput(path="host/b.txt", content="x"), None,
                                    seen_as="/work")) == "path_escape"
    assert not (work / "sub" / "b.txt").exists()


def test_a_symlink_loop_is_invalid_input_not_a_hang(work: Path) -> None:
    (work / "a").symlink_to("b")
    (work / "b").symlink_to("/work/a")
    assert _kind(lambda: confine(work, "a/x", "/work")) == "invalid_input"
