"""The detached supervisor of one bash tool call: `python -I -S wrapper.py <started.json> <lock-fd>`.

The runner starts it in a new session (its own process group) so it and the tool
outlive the runner; a fresh runner adopts the call by watching the lock this process
holds. It reads its spec from the call's started record, streams the tool's stdout and
stderr into capped files, writes the exit record atomically when the tool ends or the
deadline passes, and then kills its whole process group (itself included), so neither
a timed-out tool nor its background children outlive the call.

Standard library only: it runs with `-I -S`, outside the package's environment.
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
    os.fsync(lock_fd)
    try:
        outcome = supervise(spec)
    except OSError as err:  # the tool could not be started (exec failure, EAGAIN from RLIMIT_NPROC)
        outcome = {"spawn_error": f"{type(err).__name__}: {err}"}
    write_json_atomic(spec["exit_path"], outcome)
    os.killpg(0, signal.SIGKILL)  # the record is durable; take background stragglers (and us) down


def supervise(spec: dict) -> dict:
    uid = spec.get("uid")
    proc = subprocess.Popen(
        spec["argv"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=spec["cwd"], env=spec["env"], close_fds=True, user=uid, group=spec.get("gid"),
        extra_groups=[] if uid is not None else None, preexec_fn=lambda: _limit(spec["limits"]))
    sinks = {proc.stdout: _Sink(spec["stdout_path"], spec["cap"]),
             proc.stderr: _Sink(spec["stderr_path"], spec["cap"])}
    deadline = spec["deadline_monotonic"]
    # On timeout the tool is not killed here: main() kills the whole group right after
    # the exit record is durable, which also catches the tool's children.
    finished = _pump(proc, sinks, deadline) and _wait(proc, deadline)
    for sink in sinks.values():
        sink.close()
    code = proc.returncode if finished else None
    return {"exit_code": code if code is not None and code >= 0 else None,
            "signal": -code if code is not None and code < 0 else None, "timed_out": not finished,
            "stdout_bytes": sinks[proc.stdout].total, "stderr_bytes": sinks[proc.stderr].total}


def _limit(limits: dict) -> None:
    # Runs in the child after the uid drop (subprocess does setuid before preexec_fn).
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))


def _wait(proc: subprocess.Popen, deadline: float) -> bool:
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        return True
    except subprocess.TimeoutExpired:
        return False


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
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()


def _pump(proc: subprocess.Popen, sinks: dict, deadline: float) -> bool:
    """Streams both pipes into their sinks; False if the deadline passed first."""
    selector = selectors.DefaultSelector()
    for pipe in sinks:
        selector.register(pipe, selectors.EVENT_READ)
    linger_until = None  # once the tool exits, background children get a moment to finish writing
    while selector.get_map():
        now = time.monotonic()
        if now >= deadline:
            return False
        if linger_until is None and proc.poll() is not None:
            linger_until = now + 0.5
        if linger_until is not None and now >= linger_until:
            break
        for key, _ in selector.select(timeout=min(deadline - now, 0.2)):
            data = os.read(key.fileobj.fileno(), READ_CHUNK)
            if data:
                sinks[key.fileobj].take(data)
            else:
                selector.unregister(key.fileobj)
    selector.close()
    return True


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
