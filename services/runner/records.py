"""What the runner keeps on disk per session and per tool call.

`<sandbox_root>/.sessions/<key>/work` is the tools' world (owned by the session's uid; the
key is a hash of tenant and session, `tool_view.session_key`, so no name shows in a tool's
mount table); `etc/` beside it holds the passwd and group its tools see; `calls/` is
root-only (0700) and holds, per tool_call_id:

- `<id>.json`          the finished call's result: the idempotency record;
- `<id>.started.json`  written before a bash tool starts: its spec, deadline, files;
- `<id>.lock`          flock held by the detached wrapper while the tool runs (pid inside);
- `<id>.exit.json`     written by the wrapper when the tool ended or timed out;
- `<id>.stdout`, `<id>.stderr`, `<id>.wrapper.log`  capped output, wrapper diagnostics.

Every JSON record is written atomically, so a reader sees it whole or not at all.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wakeline.contract.commands import ToolResultReport
from wakeline.contract.ids import SAFE_ID  # noqa: F401 (re-exported: the runner checks ids with it)
from wakeline_runner.tool_view import WORK_MOUNT
from wakeline_runner.tools import ToolError
from wakeline_runner.wrapper import write_json_atomic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallFiles:
    calls: Path
    call_id: str

    def _path(self, suffix: str) -> Path:
        return self.calls / f"{self.call_id}{suffix}"

    result = property(lambda self: self._path(".json"))
    started = property(lambda self: self._path(".started.json"))
    lock = property(lambda self: self._path(".lock"))
    exit = property(lambda self: self._path(".exit.json"))
    stdout = property(lambda self: self._path(".stdout"))
    stderr = property(lambda self: self._path(".stderr"))
    log = property(lambda self: self._path(".wrapper.log"))


@dataclass(frozen=True)
class SessionDirs:
    work: Path
    calls: Path
    etc: Path | None = None  # the passwd and group its tools see (under bwrap)
    owner: tuple[int, int] | None = None  # (uid, gid) of its tools and files; None if the runner is not root
    seen_as: str = WORK_MOUNT  # where its tools see `work` (its host path when they run unsandboxed)

    def call(self, call_id: str) -> CallFiles:
        return CallFiles(self.calls, call_id)


def ensure_dir(path: Path, mode: int, parents: bool = False) -> bool:
    """Creates `path` with exactly `mode`; True if it was created (an existing dir is left alone)."""
    try:
        path.mkdir(mode=mode, parents=parents)
    except FileExistsError:
        return False
    os.chmod(path, mode)  # mkdir's mode is filtered by the umask
    return True


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        return None


def write_json(path: Path, value: dict[str, Any], durable: bool = True) -> None:
    write_json_atomic(str(path), value, durable)


def read_result(files: CallFiles) -> tuple[str, ToolResultReport] | None:
    """The recorded (request digest, report) of a finished call, if there is one."""
    record = read_json(files.result)
    if record is None:
        return None
    return record["request_digest"], ToolResultReport.model_validate(record["report"])


def write_result(files: CallFiles, request_digest: str, report: ToolResultReport, durable: bool = True) -> None:
    write_json(files.result, {"request_digest": request_digest, "report": report.model_dump(mode="json")}, durable)


def recorded_result(call: CallFiles) -> tuple[str, ToolResultReport] | ToolError | None:
    """The call's record; an unreadable one is an error result, since the call may have run."""
    try:
        return read_result(call)
    except Exception as err:  # noqa: BLE001 - corrupt JSON, an old shape, an unreadable file
        log.error("the result record of call %s is unreadable: %r", call.call_id, err)
        return crashed(f"this call's recorded result is unreadable ({type(err).__name__}); it is not "
                       "re-run because it may already have had side effects")


def record_result(call: CallFiles, digest: str, report: ToolResultReport, durable: bool = True) -> None:
    """Records the result; if that fails, the result is published anyway.

    A call that is safe to re-run (the file tools) is recorded with `durable=False`: two
    fsyncs per call were half the runner's time on no-op tools, and what they guard
    against, a machine crash losing the record, only costs such a call a re-run.

    Stopping instead would hand the call to the next runner, which fails the same way:
    one session's call would take down every runner. Running twice is still prevented
    where it matters: a bash call's `started` record, written before its tool launches,
    makes any later delivery adopt it or read its outcome, never launch it again; the
    file tools are safe to re-run. What is lost is only a byte-identical replay.
    """
    try:
        write_result(call, digest, report, durable)
    except Exception:  # noqa: BLE001 - disk full, read-only, quota: all the same to the session
        log.exception("could not record the result of call %s; publishing it unrecorded", call.call_id)


def crashed(message: str) -> ToolError:
    return ToolError(error_kind="crashed", message=message)
