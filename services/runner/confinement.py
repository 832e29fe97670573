"""Keeps file tools inside a session's work directory.

`confine` resolves a requested path with realpath (symlinks inside the work directory are
fine, symlinks out are refused) and returns its parts relative to the work directory.
`confined_dir` and `open_at` then open those parts one by one from a work-directory fd with
O_NOFOLLOW, so a symlink swapped in between the check and the open (a tool process
racing the runner, which is root) fails instead of escaping.
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


def confine(work: Path, requested: str) -> tuple[str, ...]:
    """The path's parts relative to `work`; raises ToolFailure("path_escape") outside it."""
    root = os.path.realpath(work)
    candidate = requested if os.path.isabs(requested) else os.path.join(root, requested)
    try:
        real = os.path.realpath(candidate)
    except (ValueError, OSError) as err:
        raise ToolFailure("invalid_input", f"bad path {requested!r}: {err}") from err
    if real != root and not real.startswith(root + os.sep):
        raise ToolFailure("path_escape", f"{requested!r} resolves outside the session's work directory")
    return Path(real).relative_to(root).parts


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
