"""Keeps file tools inside a session's work directory.

`confine` resolves a requested path as the session's tools would (symlinks inside the work
directory are fine, symlinks out are refused) and returns its parts relative to the work
directory. The runner is on the host but a tool is not: an absolute path, and an absolute
symlink a tool made, are read in the tool's view, where the work dir is at `/work`
(`tool_view.py`), never as host paths. `confined_dir` and `open_at` then open those parts
one by one from a work-directory fd with O_NOFOLLOW, so a symlink swapped in between the
check and the open (a tool process racing the runner, which is root) fails instead of
escaping.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Iterator

from wakeline_runner.tools import ToolFailure

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


# As the kernel's limit on symlinks followed in one path lookup.
MAX_LINKS = 40


def confine(work: Path, requested: str, seen_as: str | None = None) -> tuple[str, ...]:
    """The path's parts relative to `work`, resolved as the session's tools see it: the work
    dir at `seen_as` (at `work` itself when None). Raises ToolFailure("path_escape") for a
    path that leaves the work dir on the way, even one that would come back into it."""
    if "\x00" in requested:
        raise ToolFailure("invalid_input", f"bad path {requested!r}: embedded null byte")
    root = os.path.realpath(work)
    view = seen_as or root
    resolved: list[str] = []
    pending = _in_view(requested, view, requested)[::-1]
    links = 0
    while pending:
        part = pending.pop()
        if part == "..":
            if not resolved:
                raise _escape(requested, view)
            resolved.pop()
            continue
        try:
            target = os.readlink(os.path.join(root, *resolved, part))
        except OSError:  # not a symlink, or not there (yet): a name like any other
            resolved.append(part)
            continue
        links += 1
        if links > MAX_LINKS:
            raise ToolFailure("invalid_input", f"{requested!r}: too many levels of symbolic links")
        if os.path.isabs(target):
            resolved = []
        pending += _in_view(target, view, requested)[::-1]
    return tuple(resolved)


def _in_view(path: str, view: str, requested: str) -> list[str]:
    """The parts of `path` from the work dir: as they are when relative; when absolute, what
    follows the work dir's place in the view (refused when it is not under it)."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not os.path.isabs(path):
        return parts
    while parts and parts[0] == "..":  # "/.." is "/"
        parts.pop(0)
    top = [p for p in view.split("/") if p]
    if parts[:len(top)] != top:
        raise _escape(requested, view)
    return parts[len(top):]


def _escape(requested: str, view: str) -> ToolFailure:
    return ToolFailure("path_escape", f"{requested!r} resolves outside the session's work directory, {view}")


@contextlib.contextmanager
def confined_dir(work: Path, parts: tuple[str, ...], create: bool = False,
                 owner: tuple[int, int] | None = None) -> Iterator[int]:
    """Yields an fd for the directory `work/parts`, never following a symlink on the way.

    `create` makes missing directories, given to `owner` (uid, gid) when there is one.
    """
    fds = [os.open(work, DIR_FLAGS)]
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fds[-1])
                    if owner is not None:
                        os.chown(part, *owner, dir_fd=fds[-1], follow_symlinks=False)
            fds.append(open_subdir(fds[-1], part))
        yield fds[-1]
    finally:
        for fd in reversed(fds):
            os.close(fd)


def open_subdir(parent: int, name: str) -> int:
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except NotADirectoryError:
        # O_DIRECTORY|O_NOFOLLOW reports a symlink as ENOTDIR; call it what it is.
        if stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
        raise


def open_at(dir_fd: int, name: str, flags: int, mode: int = 0o644) -> int:
    """Opens `name` in `dir_fd` without following a symlink (ELOOP if it is one)."""
    return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)


def failure_for(err: OSError) -> ToolFailure:
    """Maps an OSError from a file tool to a typed failure."""
    kinds = {errno.ENOENT: "not_found", errno.ELOOP: "path_escape", errno.EACCES: "permission_denied",
             errno.EPERM: "permission_denied", errno.EFBIG: "too_large", errno.ENOSPC: "too_large",
             errno.EDQUOT: "too_large"}
    kind = kinds.get(err.errno, "invalid_input")
    if err.errno == errno.ELOOP:
        return ToolFailure(kind, "a symlink appeared in the path while it was being opened")
    return ToolFailure(kind, os.strerror(err.errno or 0))
