"""Starts each bash call's supervisor by forking a process that has `wrapper.py` imported already.

A fresh `python -I -S wrapper.py` per call cost ~70 ms of CPU (the interpreter's start and
the imports), which capped every runner on this 2-core machine at ~24 calls/s whatever
the number of runners (docs/history/benchmarks.md, ninth session). A fork of an interpreter that
has done that once costs about a millisecond.

The fork server (`python -I -S forkserver.py <socket fd>`, standard library only, like
the wrapper) is the runner's child and lives as long as the runner: it exits when the
runner's end of their socket closes, including after `kill -9`. For each request (a
started record's path, the wrapper log's path, the calls directory, and the call's
locked flock descriptor passed over the socket) it forks a child that leaves for a
session of its own and becomes `wrapper.main`, exactly as the separately started
wrapper did: it holds the call's lock while it lives and outlives runner and fork
server alike, so a fresh runner adopts it the same way. The server replies with the
child's pid and reaps it when it ends.

Everything else about a call is unchanged: the started record is written before the
request, and a request whose reply is lost (the server died meanwhile) is handled like a
wrapper that died: whoever holds the lock is waited for, and the files say what ran.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from types import ModuleType

REPLY_TIMEOUT_S = 10.0


class ForkServer:
    """The runner's side: starts the server on first use and again after it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._process: subprocess.Popen | None = None

    def spawn(self, started: str, log: str, cwd: str, lock_fd: int) -> int | None:
        """Starts the call's supervisor and returns its pid.

        A server found dead when the request is sent (it never read it) is started again
        and asked once more. A server that dies after reading it leaves it unknown whether
        it forked: then None, and the caller waits on the call's lock and reads the call's
        files, as for a wrapper that died. Raises OSError when nothing was started (the
        server could not fork, or a new server could not be reached)."""
        request = json.dumps({"started": started, "log": log, "cwd": cwd}).encode()
        with self._lock:
            for attempt in range(2):
                sock = self._connected()
                try:
                    socket.send_fds(sock, [request], [lock_fd])
                except OSError:  # EPIPE: the server had died; the request went nowhere
                    self._discard()
                    if attempt:
                        raise
                    continue
                try:
                    reply = sock.recv(4096)
                except OSError:  # no reply within REPLY_TIMEOUT_S
                    reply = b""
                if not reply:
                    self._discard()
                    return None
                break
        answer = json.loads(reply)
        if "error" in answer:
            raise OSError(answer["error"])
        return int(answer["pid"])

    def close(self) -> None:
        with self._lock:
            self._discard()

    def _connected(self) -> socket.socket:
        if self._sock is None:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                self._process = subprocess.Popen(
                    [sys.executable, "-I", "-S", __file__, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                    start_new_session=True, stdin=subprocess.DEVNULL, env={})
            except BaseException:
                ours.close()
                raise
            finally:
                theirs.close()
            ours.settimeout(REPLY_TIMEOUT_S)
            self._sock = ours
        return self._sock

    def _discard(self) -> None:
        if self._sock is not None:
            self._sock.close()  # the server sees the end of its socket and exits
            self._sock = None
        if self._process is not None:
            try:
                self._process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:  # wedged: its children are in sessions of their own
                self._process.kill()
                self._process.wait()
            self._process = None


def serve(sock: socket.socket) -> None:
    """The server's loop: one fork per request until the runner's end closes."""
    # By path, as `-I` leaves this file's directory off sys.path: imported once, before any fork.
    spec = importlib.util.spec_from_file_location("wakeline_wrapper", Path(__file__).with_name("wrapper.py"))
    assert spec is not None and spec.loader is not None
    wrapper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wrapper)

    signal.signal(signal.SIGCHLD, _reap)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, 65536, 1)
        except ConnectionResetError:
            return
        if not message:
            return
        try:
            request = json.loads(message)
            if len(fds) != 1:
                raise OSError(f"expected the call's lock descriptor, got {len(fds)}")
            pid = os.fork()
        except (OSError, ValueError) as err:
            reply = {"error": f"{type(err).__name__}: {err}"}
        else:
            if pid == 0:
                _become_supervisor(wrapper, sock, request, fds[0])
            reply = {"pid": pid}
        finally:
            for fd in fds:
                os.close(fd)  # the child's copy now holds the call's lock, ours must not
        try:
            sock.send(json.dumps(reply).encode())
        except OSError:  # the runner is gone; the child is on its own anyway
            return


def _become_supervisor(wrapper: ModuleType, sock: socket.socket, request: dict, lock_fd: int) -> None:
    """In the forked child: what the runner's Popen of the wrapper used to set up, then the wrapper."""
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the wrapper waits for its own tool
        sock.close()
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        os.chdir(request["cwd"])
        wrapper.main(request["started"], lock_fd)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(1)  # main ends by killing its own group; never return into the server's loop


def _reap(_signum: int, _frame: object) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
