"""The detached supervisor of one bash tool call: `main(<started.json>, <lock-fd>)`.

The runner's fork server (`forkserver.py`) forks it into a new session (its own process
group) so it and the tool outlive the runner; a fresh runner adopts the call by watching the lock this process
holds. It joins the session's control groups, reads its spec from the call's started record,
streams the tool's stdout and stderr into capped files, stops the tool if it grows the
session's work dir past its budget or the disk below the runner's reserve, writes the
exit record atomically when the tool ends or the deadline passes, and then kills its
whole process group (itself included), so neither a timed-out tool nor its background
children outlive the call (bwrap's pid namespace takes `setsid` escapees with it; without
bwrap the runner empties the session's control groups after its last running call).

Nothing here is fsynced. A process that dies (this one, the runner) loses nothing that
was written, and a machine that crashes takes the tool down with it: what must survive
that is the runner's, the started record (written durably before the tool exists, so the
call never runs twice) and the result record (written durably before the result is
published, so a redelivered call replays what was sent). An exit record or output lost
in a machine crash makes the call read as one that died with its host: reported crashed,
not re-run. Eight fsyncs per call here, each a journal commit, were most of a call's
time in the runner's slot (docs/history/benchmarks.md, tenth session).

Standard library only, and one file: the fork server loads it by path under `-I -S`,
outside the package's environment, where no sibling module can be imported. So it stays
one module, and the atomic write `records.py` uses and the work-dir measure `files.py`
uses are defined here rather than there.
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import time
import uuid

READ_CHUNK = 65536


def write_json_atomic(path: str, value: dict, durable: bool = True) -> None:
    """tmp + fsync + rename + fsync(dir): the record is either absent or whole, even after a crash.

    `durable=False` skips both fsyncs: still whole or absent to every reader and after a
    process crash (the page cache survives it), but a machine crash may lose it.
    """
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, json.dumps(value).encode("utf-8"))
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if not durable:
        return
    dir_fd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def main(started_path: str, lock_fd: int) -> None:
    with open(started_path, "rb") as f:
        spec = json.load(f)
    # The pid in the lock file lets an adopting runner kill this group past the deadline.
    os.ftruncate(lock_fd, 0)
    os.pwrite(lock_fd, f"{os.getpid()}\n".encode(), 0)
    try:
        # Into the session's control groups before the tool exists, so all it forks is
        # counted against its session's limits.
        for group in spec.get("cgroups") or ():
            with open(os.path.join(group, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        outcome = supervise(spec)
    except OSError as err:  # the tool could not be started (exec failure, EAGAIN from RLIMIT_NPROC)
        outcome = {"spawn_error": f"{type(err).__name__}: {err}"}
    write_json_atomic(spec["exit_path"], outcome, durable=False)
    os.killpg(0, signal.SIGKILL)  # the record is written; take background stragglers (and us) down


def with_bwrap_options(argv: list[str], options: list[str]) -> tuple[list[str], int]:
    """`argv` (`bwrap -- <command>`) reading bubblewrap's `options` from a file descriptor
    (`--args <fd>`), and that descriptor, for the child to inherit (`pass_fds`) and the
    caller to close. The options name host paths; bwrap's command line, which a tool reads as
    its pid 1's, then names none. bwrap reads the memfd to its end and closes it."""
    fd = os.memfd_create("bwrap-options")
    try:
        os.write(fd, b"".join(os.fsencode(option) + b"\0" for option in options))
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return [argv[0], "--args", str(fd), *argv[1:]], fd


def supervise(spec: dict) -> dict:
    uid = spec.get("uid")
    watch = _Watch(spec["cwd"], spec.get("work_dir_bytes"), spec.get("disk_reserve_bytes", 0))
    argv, fds = spec["argv"], ()
    if spec.get("bwrap_options") is not None:  # absent from a call an older runner started
        argv, fd = with_bwrap_options(argv, spec["bwrap_options"])
        fds = (fd,)
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=spec["cwd"], env=spec["env"], close_fds=True, pass_fds=fds, user=uid, group=spec.get("gid"),
            extra_groups=[] if uid is not None else None, preexec_fn=lambda: _limit(spec["limits"]))
    finally:
        for fd in fds:
            os.close(fd)
    sinks = {proc.stdout: _Sink(spec["stdout_path"], spec["cap"]),
             proc.stderr: _Sink(spec["stderr_path"], spec["cap"])}
    deadline = spec["deadline_monotonic"]
    # On timeout (or a stop) the tool is not killed here: main() kills the whole group
    # right after the exit record is written, which also catches the tool's children.
    stopped = _pump(proc, sinks, deadline, watch) or _wait(proc, deadline, watch)
    for sink in sinks.values():
        sink.close()
    code = proc.returncode if stopped is None else None
    outcome = {"exit_code": code if code is not None and code >= 0 else None,
               "signal": -code if code is not None and code < 0 else None, "timed_out": stopped == "timeout",
               "stdout_bytes": sinks[proc.stdout].total, "stderr_bytes": sinks[proc.stderr].total}
    if stopped not in (None, "timeout"):
        outcome.update(stopped=stopped, work_dir_used=watch.used, disk_free=watch.free)
    return outcome


class _Watch:
    """Stops a call that grows its session's work dir past its budget, or takes the disk
    below the reserve the runner needs for its own records.

    Checked every ~0.1 s (less often when the work dir is slow to measure), so a call can
    overshoot by what it writes in that time; `/tmp` is a size-bounded tmpfs instead."""

    def __init__(self, work: str, budget: int | None, reserve: int):
        self.work, self.reserve = work, reserve
        self.used = usage(work) if budget else 0
        self.free = 0
        # A work dir already over budget may still be cleaned up; only growth is stopped.
        self.limit = max(budget, self.used) if budget else None
        self.next_at = 0.0

    def stop_reason(self, now: float) -> str | None:
        if now < self.next_at:
            return None
        began = time.monotonic()
        st = os.statvfs(self.work)
        self.free = st.f_bavail * st.f_frsize
        if self.free < self.reserve:
            return "disk_low"
        if self.limit is not None:
            self.used = usage(self.work)
            if self.used > self.limit:
                return "work_dir_full"
        self.next_at = now + max(0.1, 20 * (time.monotonic() - began))
        return None


def usage(top: str) -> int:
    """Bytes allocated under `top` (st_blocks), symlinks not followed, other filesystems not entered."""
    total, stack = 0, [top]
    device = os.lstat(top).st_dev
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:  # removed meanwhile, or not a directory any more
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += st.st_blocks * 512
            if entry.is_dir(follow_symlinks=False) and st.st_dev == device:
                stack.append(entry.path)
    return total


def _limit(limits: dict) -> None:
    # Runs in the child after the uid drop (subprocess does setuid before preexec_fn).
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))


def _wait(proc: subprocess.Popen, deadline: float, watch: _Watch) -> str | None:
    """Waits for the tool's exit (its pipes may be closed long before); why it was cut short, or None."""
    while True:
        now = time.monotonic()
        if now >= deadline:
            return "timeout"
        if (reason := watch.stop_reason(now)) is not None:
            return reason
        try:
            proc.wait(timeout=min(deadline - now, 0.1))
            return None
        except subprocess.TimeoutExpired:
            pass


class _Sink:
    """Keeps at most cap+1 bytes of a stream (the +1 tells a reader it was truncated), counts all."""

    def __init__(self, path: str, cap: int):
        self.file = open(path, "wb")
        self.room = cap + 1
        self.total = 0

    def take(self, data: bytes) -> None:
        self.total += len(data)
        if self.room > 0:
            self.file.write(data[:self.room])
            self.room -= min(len(data), self.room)

    def close(self) -> None:
        self.file.close()


def _pump(proc: subprocess.Popen, sinks: dict, deadline: float, watch: _Watch) -> str | None:
    """Streams both pipes into their sinks; why it was cut short (deadline, disk), or None."""
    selector = selectors.DefaultSelector()
    for pipe in sinks:
        selector.register(pipe, selectors.EVENT_READ)
    linger_until = None  # once the tool exits, background children get a moment to finish writing
    try:
        while selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                return "timeout"
            if (reason := watch.stop_reason(now)) is not None:
                return reason
            if linger_until is None and proc.poll() is not None:
                linger_until = now + 0.5
            if linger_until is not None and now >= linger_until:
                break
            for key, _ in selector.select(timeout=min(deadline - now, 0.1)):
                data = os.read(key.fileobj.fileno(), READ_CHUNK)
                if data:
                    sinks[key.fileobj].take(data)
                else:
                    selector.unregister(key.fileobj)
    finally:
        selector.close()
    return None


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
