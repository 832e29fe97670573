"""Turns what a bash call's wrapper left on disk into how the call ended.

Called only once no wrapper holds the call's lock, so the files are final. What a dead
wrapper left in its log (a traceback naming the runner's files) is for the runner's log,
not for the result, which a tool and its model read.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from wakeline_runner.records import CallFiles, read_json
from wakeline_runner.tools import BashResult, ErrorKind

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BashOutcome:
    result: BashResult  # what the tool printed, even when it failed
    error_kind: ErrorKind | None = None
    message: str | None = None


def outcome_from_files(files: CallFiles, started: dict, killed_by_runner: bool) -> BashOutcome:
    cap = started["cap"]
    exit_record = read_json(files.exit) or {}
    stdout, stdout_cut = _read_capped(files.stdout, cap)
    stderr, stderr_cut = _read_capped(files.stderr, cap)
    result = BashResult(exit_code=exit_record.get("exit_code"), signal=exit_record.get("signal"),
                        stdout=stdout, stderr=stderr,
                        stdout_truncated=stdout_cut or exit_record.get("stdout_bytes", 0) > cap,
                        stderr_truncated=stderr_cut or exit_record.get("stderr_bytes", 0) > cap)
    if exit_record.get("timed_out") or (not exit_record and killed_by_runner):
        return BashOutcome(result, "timeout", f"timed out after {started['timeout_s']}s; "
                                              "its whole process group was killed")
    if exit_record.get("stopped") == "work_dir_full":
        return BashOutcome(result, "too_large", f"stopped: the session's work dir grew past its budget of "
                                                f"{started.get('work_dir_bytes')} bytes (it held "
                                                f"{exit_record.get('work_dir_used')}); delete files to make room")
    if exit_record.get("stopped") == "disk_low":
        return BashOutcome(result, "too_large", f"stopped: the sandboxes' filesystem fell to "
                                                f"{exit_record.get('disk_free')} bytes free, under the runner's "
                                                f"reserve of {started.get('disk_reserve_bytes')}")
    if "spawn_error" in exit_record:
        return BashOutcome(result, "crashed", f"the tool could not start: {exit_record['spawn_error']}")
    if not exit_record:
        # Not re-run: it may already have had side effects, and running it twice could repeat them.
        _log_tail(files)
        return BashOutcome(result, "crashed", "the tool was interrupted (its supervisor died without "
                                              "recording an exit, e.g. the host went down); it was not "
                                              "re-run because it may already have had side effects")
    return BashOutcome(result)


def _read_capped(path, cap: int) -> tuple[str, bool]:
    """The first `cap` bytes as text, and whether there were more (the wrapper keeps cap+1)."""
    try:
        with open(path, "rb") as f:
            data = f.read(cap + 1)
    except FileNotFoundError:
        return "", False
    return data[:cap].decode("utf-8", "replace"), len(data) > cap


def _log_tail(files: CallFiles) -> None:
    try:
        tail = files.log.read_bytes()[-500:].decode("utf-8", "replace").strip()
    except FileNotFoundError:
        return
    if tail:
        log.error("call %s: its supervisor died without recording an exit; its log ends: %s", files.call_id, tail)
