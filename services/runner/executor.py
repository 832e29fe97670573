"""One tool call request in, one result report out: idempotent by tool_call_id, never raises.

A finished call's report is recorded in the session's `calls/` directory before it is
returned; a request whose call already has a record gets that record back (`replayed`)
and runs nothing. Bash calls may also be mid-flight from an earlier runner: the sandbox
adopts those. File tools run in-process and are re-run if a crash lost their result,
which is harmless: reads have no effect and `write_file` writes whole files. Every
report returned, replays included, is cut to fit one record (`fitting.py`), and any
failure, a bug included, becomes this call's error report: one call never stops a runner.
An error's message names no host path: the work dir is shown where its tools see it,
the rest of the sandboxes' paths as placeholders (`tool_view.masked`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from datetime import datetime, timezone
from functools import partial
from typing import Callable

from wakeline.contract.commands import ToolCallRequest, ToolResultReport
from wakeline.contract.limits import input_budget
from wakeline.contract.tools import BashInput, ListFilesInput, ReadFileInput, ToolInput, WriteFileInput
from wakeline_runner import files
from wakeline.contract.fitting import fit_report
from wakeline_runner.records import SAFE_ID, SessionDirs, crashed, record_result, recorded_result
from wakeline_runner.sandbox import Sandbox
from wakeline_runner.settings import RunnerSettings
from wakeline_runner.tool_view import masked
from wakeline_runner.tools import ToolError, ToolFailure, ToolOutput, parse_input

log = logging.getLogger(__name__)
# Up to this much output a report is fitted on the event loop (a dump of a few KiB takes
# microseconds; a thread hop takes longer under load).
INLINE_FIT_CHARS = 16 * 1024


class Executor:
    def __init__(self, settings: RunnerSettings, sandbox: Sandbox):
        self.settings = settings
        self.sandbox = sandbox
        self.budget = input_budget(settings.max_record_bytes)

    async def execute(self, request: ToolCallRequest) -> ToolResultReport:
        began = time.monotonic()
        try:
            report = await self._execute(request, began)
        except Exception as err:  # a bug must become this call's result, never stop the runner
            log.exception("tool call %s of session %s failed in the runner", request.tool_call_id,
                          request.session_id)
            report = self._report(request, crashed(self._masked(f"the runner failed: {type(err).__name__}: {err}")),
                                  began)
        # Replays too: a result recorded before results were cut to fit may be too large.
        return await self._fitted(report)

    async def _fitted(self, report: ToolResultReport) -> ToolResultReport:
        """`fit_report`, in a thread only when the output is large enough to cost more than the hop."""
        if len(report.output) <= INLINE_FIT_CHARS:
            return fit_report(report, self.budget)
        return await asyncio.to_thread(fit_report, report, self.budget)

    async def _execute(self, request: ToolCallRequest, began: float) -> ToolResultReport:
        try:
            dirs = self.sandbox.open_session(request.tenant, request.session_id)
            if not SAFE_ID.match(request.tool_call_id):
                raise ToolFailure("invalid_input", f"tool_call_id {request.tool_call_id!r} is not a plain name")
        except ToolFailure as failure:
            return self._report(request, _error(failure), began)  # nowhere to record it; nothing ran
        except OSError as err:
            log.exception("cannot prepare the sandbox of session %s", request.session_id)
            return self._report(request, crashed(self._masked(f"sandbox unavailable: {err}")), began)
        call = dirs.call(request.tool_call_id)
        digest = request_digest(request)
        recorded = recorded_result(call)
        if isinstance(recorded, ToolError):
            return self._report(request, recorded, began)
        if recorded is not None:
            if recorded[0] != digest:
                return self._report(request, ToolError(error_kind="id_conflict", message=(
                    "this tool_call_id already ran with another name or input")), began)
            return recorded[1].model_copy(update={"replayed": True})
        # A call that started (its bash tool launched) is adopted however old it is; only a
        # call that never started may be refused as expired. A fresh re-issue of the same
        # id (after a wake) carries a new issued_at and still runs.
        if self.stale(request) and not call.started.exists():
            return self._report(request, ToolError(error_kind="expired", message=(
                f"issued at {request.issued_at.isoformat()}, more than {self.settings.stale_after_s:g} s ago;"
                " not started")), began)
        output = self._hidden(await self._dispatch(request, dirs), dirs)
        report = await self._fitted(self._report(request, output, began))
        # Off the event loop (other sessions' calls go on meanwhile); only bash calls, whose
        # re-run is not harmless, pay for an fsync.
        await asyncio.to_thread(record_result, call, digest, report, request.name == "bash")
        return report

    async def _dispatch(self, request: ToolCallRequest, dirs: SessionDirs) -> ToolOutput:
        try:
            tool_input = parse_input(request.name, request.input)
            timeout_s = self._timeout(request)
            if isinstance(tool_input, BashInput):
                outcome = await self.sandbox.run_bash(dirs, request.tool_call_id, tool_input.command, timeout_s)
                if outcome.error_kind is None:
                    return outcome.result
                return ToolError(error_kind=outcome.error_kind, message=outcome.message or "",
                                 details=outcome.result.model_dump())
            return await asyncio.wait_for(asyncio.to_thread(self._file_tool(tool_input, dirs)), timeout_s)
        except ToolFailure as failure:
            return _error(failure)
        except asyncio.TimeoutError:
            return ToolError(error_kind="timeout", message=f"{request.name} did not finish in time")
        except Exception as err:  # a bug must still become a result, or the call would hang forever
            log.exception("tool call %s (%s) crashed", request.tool_call_id, request.name)
            return crashed(f"{type(err).__name__}: {err}")

    def _file_tool(self, tool_input: ToolInput, dirs: SessionDirs) -> Callable[[], ToolOutput]:
        work, owner, seen_as = dirs.work, dirs.owner, dirs.seen_as
        if isinstance(tool_input, ReadFileInput):
            return partial(files.read_file, work, tool_input, owner, seen_as)
        if isinstance(tool_input, WriteFileInput):
            return partial(files.write_file, work, tool_input, owner, self.settings.work_dir_bytes, seen_as)
        assert isinstance(tool_input, ListFilesInput)
        return partial(files.list_files, work, tool_input, seen_as)

    def _hidden(self, output: ToolOutput, dirs: SessionDirs) -> ToolOutput:
        """An error's message as the tool would see it: the runner's own messages (an
        OSError's, a supervisor's that could not start the tool) may name host paths."""
        if not isinstance(output, ToolError):
            return output
        return output.model_copy(update={"message": self._masked(output.message, dirs)})

    def _masked(self, text: str, dirs: SessionDirs | None = None) -> str:
        if dirs is None:
            return masked(text, self.settings.sandbox_root)
        return masked(text, self.settings.sandbox_root, dirs.work, dirs.seen_as)

    def stale(self, request: ToolCallRequest) -> bool:
        """Issued longer than `stale_after_s` ago (a call with no issue time never is)."""
        if request.issued_at is None:
            return False
        issued = request.issued_at
        if issued.tzinfo is None:  # a producer's naive time: read it as UTC rather than fail on it
            issued = issued.replace(tzinfo=timezone.utc)
        age = (datetime.now(timezone.utc) - issued).total_seconds()
        return age > self.settings.stale_after_s

    def _timeout(self, request: ToolCallRequest) -> float:
        if not request.timeout_s > 0:
            raise ToolFailure("invalid_input", f"timeout_s must be positive, got {request.timeout_s}")
        return min(request.timeout_s, self.settings.max_timeout_s)

    def _report(self, request: ToolCallRequest, output: ToolOutput, began: float) -> ToolResultReport:
        try:
            encoded = output.model_dump_json()
        except ValueError as err:  # e.g. a file name that is not UTF-8; the output cannot travel
            output = crashed(f"the tool's output could not be encoded: {err}")
            encoded = output.model_dump_json()
        error = output if isinstance(output, ToolError) else None
        # The name becomes part of a tool_result event stored as jsonb, which cannot hold NUL.
        return ToolResultReport(
            session_id=request.session_id, tenant=request.tenant, tool_call_id=request.tool_call_id,
            name=request.name.replace("\x00", "\ufffd"), output=encoded, is_error=error is not None,
            error_kind=error.error_kind if error else None,
            duration_ms=int((time.monotonic() - began) * 1000), runner=self.settings.host)


def request_digest(request: ToolCallRequest) -> str:
    """What makes two requests with one tool_call_id the same call."""
    canonical = json.dumps({"name": request.name, "input": request.input}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _error(failure: ToolFailure) -> ToolError:
    return ToolError(error_kind=failure.kind, message=failure.message, details=failure.details)
