"""What feeds the runner's metrics (declared below): an executor wrapper timing each
tool call by tool and outcome and counting the calls running, and a sampler of the calls
waiting (queue depth) and the consumer's lag. app.py puts it in place; the loop and the
executor know nothing of it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from prometheus_client import Gauge, Histogram

from wakeline.runtime import logs, metrics, tracing
from wakeline.contract.commands import ToolCallRequest, ToolResultReport
from wakeline.contract.tools import TOOLS

# This service's metrics (names, labels and buckets: docs/operations.md says what each means).
TOOL_SECONDS = Histogram("wakeline_tool_call_seconds", "One tool call in the runner, received to result ready",
                         ["tool", "outcome"], buckets=metrics.SECONDS)
RUNNER_QUEUE = Gauge("wakeline_runner_queue_depth", "Tool calls accepted by this runner and not yet running "
                     "(behind the same session's earlier call, or waiting for a slot)")
RUNNER_AT_QUOTA = Gauge("wakeline_runner_calls_at_quota", "Tool calls waiting in this runner because their tenant "
                        "runs its tool calls in flight quota's worth here already", ["tenant"])
RUNNER_RUNNING = Gauge("wakeline_runner_calls_running", "Tool calls running in this runner's sandboxes")

log = logging.getLogger(__name__)


def outcome_of(report: ToolResultReport) -> str:
    """ok, replayed, or the error kind (a short word from the executor), else `error`."""
    if not report.is_error:
        return "replayed" if report.replayed else "ok"
    kind = report.error_kind or "error"
    return kind if kind.replace("_", "").isalnum() and len(kind) <= 40 else "error"


class TimedExecutor:
    """The executor, with each call's duration and outcome recorded under its tool's name."""

    def __init__(self, executor: Any):
        self._executor = executor
        self.running = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._executor, name)

    async def execute(self, request: ToolCallRequest) -> ToolResultReport:
        # This call's task logs under its session and call id, publishing included (wakeline.runtime.logs).
        logs.bind(session_id=request.session_id, tool_call_id=request.tool_call_id, seq=request.causation_seq)
        tool = request.name if request.name in TOOLS else "other"
        # The call's trace, current in this task: the result it publishes next carries it.
        span = tracing.follow(request.tool_call_id, f"runner {tool}", **{"wakeline.session_id": request.session_id})
        self.running += 1
        RUNNER_RUNNING.set(self.running)
        outcome = "runner_failed"
        with metrics.Stopwatch() as watch:
            try:
                report: ToolResultReport = await self._executor.execute(request)
                outcome = outcome_of(report)
            finally:
                self.running -= 1
                RUNNER_RUNNING.set(self.running)
                if span is not None:
                    span.set_attribute("wakeline.outcome", outcome)
                    span.end()
        TOOL_SECONDS.labels(tool, outcome).observe(watch.seconds)
        log.info("tool call %s: %s in %.3f s", request.name[:200], outcome, watch.seconds)
        return report


def start_samplers(loop: Any, executor: TimedExecutor, consumer: Any) -> list[asyncio.Task[None]]:
    """Queue depth (accepted calls not running) and the consumer's lag, every second."""
    async def queue() -> None:
        RUNNER_QUEUE.set(max(0, len(loop.scheduler.tasks) - executor.running))
        RUNNER_AT_QUOTA.clear()
        for tenant, waiting in loop.scheduler.over_cap().items():
            RUNNER_AT_QUOTA.labels(tenant).set(waiting)
    return [metrics.every(1.0, queue), metrics.every(1.0, lambda: metrics.sample_consumer_lag(consumer, "runner"))]
