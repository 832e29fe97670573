"""The file tools: read_file, write_file, list_files, confined to a session's work dir.

They run inside the runner (root), so every open goes through `confinement`, and a
written file is handed to the sandbox user. A path is read as the session's tools see it
(`seen_as`: where they see the work dir), and every path a result names is relative to
the work dir. Each raises `ToolFailure`, never OSError.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from wakeline.contract.tools import MAX_FILE_BYTES, ListFilesInput, ReadFileInput, WriteFileInput
from wakeline_runner.confinement import confine, confined_dir, failure_for, open_at, open_subdir
from wakeline_runner.tools import FileEntry, ListFilesResult, ReadFileResult, ToolFailure, WriteFileResult
from wakeline_runner.wrapper import usage as work_dir_usage

Owner = tuple[int, int] | None  # (uid, gid) files must belong to; None when not running as root


def read_file(work: Path, request: ReadFileInput, owner: Owner = None, seen_as: str | None = None) -> ReadFileResult:
    parts = _file_parts(work, request.path, seen_as)
    try:
        with confined_dir(work, parts[:-1]) as parent:
            # O_NONBLOCK: opening a FIFO a tool left behind must not hang the runner.
            fd = open_at(parent, parts[-1], os.O_RDONLY | os.O_NONBLOCK)
            try:
                size = _require_ours(_require_regular(os.fstat(fd), request.path), owner, request.path).st_size
                data = os.pread(fd, request.max_bytes, request.offset)
            finally:
                os.close(fd)
    except OSError as err:
        raise failure_for(err) from err
    return ReadFileResult(path="/".join(parts), content=data.decode("utf-8", "replace"), size=size,
                          offset=request.offset, truncated=request.offset + len(data) < size)


def write_file(work: Path, request: WriteFileInput, owner: Owner, budget: int | None = None,
               seen_as: str | None = None) -> WriteFileResult:
    parts = _file_parts(work, request.path, seen_as)
    data = request.content.encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise ToolFailure("too_large", f"content is {len(data)} bytes; the limit is {MAX_FILE_BYTES}")
    if budget is not None and (used := work_dir_usage(str(work))) + len(data) > budget:
        # The same budget a bash call is stopped at; counted before, not after, the write.
        raise ToolFailure("too_large", f"the session's work dir holds {used} bytes; {len(data)} more would pass "
                                       f"its budget of {budget}; delete files to make room")
    try:
        with confined_dir(work, parts[:-1], request.create_dirs, owner) as parent:
            fd = _open_for_write(parent, parts[-1], owner, request.path)
            try:
                os.ftruncate(fd, 0)
                _write_all(fd, data)
            finally:
                os.close(fd)
    except OSError as err:
        raise failure_for(err) from err
    return WriteFileResult(path="/".join(parts), bytes_written=len(data))


def list_files(work: Path, request: ListFilesInput, seen_as: str | None = None) -> ListFilesResult:
    parts = confine(work, request.path, seen_as)
    entries: list[FileEntry] = []
    try:
        with confined_dir(work, parts) as fd:
            complete = _walk(fd, "/".join(parts), request, entries)
    except OSError as err:
        raise failure_for(err) from err
    return ListFilesResult(path="/".join(parts) or ".", entries=entries, truncated=not complete)


def _file_parts(work: Path, path: str, seen_as: str | None) -> tuple[str, ...]:
    parts = confine(work, path, seen_as)
    if not parts:
        raise ToolFailure("invalid_input", f"{path!r} is the work directory, not a file")
    return parts


def _open_for_write(parent: int, name: str, owner: Owner, path: str) -> int:
    try:
        fd = open_at(parent, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        if owner is not None:
            os.fchown(fd, *owner)
        return fd
    except FileExistsError:
        fd = open_at(parent, name, os.O_WRONLY | os.O_NONBLOCK)
    try:
        _require_ours(os.fstat(fd), owner, path)
    except ToolFailure:
        os.close(fd)
        raise
    return fd


def _require_ours(st: os.stat_result, owner: Owner, path: str) -> os.stat_result:
    """A hard link, or a file the session's uid does not own, may be a host file (a tool can
    hard-link anything it can see on the same filesystem): the runner, which is root, must
    neither read nor change it on the session's behalf."""
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1 or (owner is not None and st.st_uid != owner[0]):
        raise ToolFailure("permission_denied", f"{path!r} is not a regular file of this session")
    return st


def _walk(dir_fd: int, prefix: str, request: ListFilesInput, entries: list[FileEntry]) -> bool:
    """Appends entries under dir_fd; False when max_entries cut the listing short."""
    with os.scandir(dir_fd) as listing:
        children = sorted(listing, key=lambda e: e.name)
    for child in children:
        if len(entries) >= request.max_entries:
            return False
        st = child.stat(follow_symlinks=False)
        name = _shown(child.name)
        path = f"{prefix}/{name}" if prefix else name
        entries.append(FileEntry(path=path, type=_kind(st.st_mode), size=st.st_size))
        if request.recursive and stat.S_ISDIR(st.st_mode):
            sub = open_subdir(dir_fd, child.name)
            try:
                if not _walk(sub, path, request, entries):
                    return False
            finally:
                os.close(sub)
    return True


def _shown(name: str) -> str:
    """A file name a tool made may not be UTF-8 (surrogate-escaped here): show it, replaced,
    rather than fail to encode the whole listing."""
    return os.fsencode(name).decode("utf-8", "replace")


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "symlink" if stat.S_ISLNK(mode) else "other"


def _require_regular(st: os.stat_result, path: str) -> os.stat_result:
    if stat.S_ISDIR(st.st_mode):
        raise ToolFailure("invalid_input", f"{path!r} is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise ToolFailure("invalid_input", f"{path!r} is not a regular file")
    return st


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
