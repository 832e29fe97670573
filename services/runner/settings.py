"""RunnerSettings: where sandboxes live, who tools run as, and what they may use."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import RUNNER_GROUP


class RunnerSettings(CommonSettings):
    kafka_username: str = "runner"
    # Relative paths are taken from the working directory at start (the repo for `make`).
    sandbox_root: Path = Path(".data/sandboxes")
    group_id: str = RUNNER_GROUP  # `<prefix>-runner`
    host: str = Field(default_factory=socket.gethostname)
    # Failure detection for the runner group (issue 37). A killed runner is a member until the
    # session timeout (6 s: the broker's minimum), or until a rebalance's join ends without
    # it: the rebalance timeout, which is also how long a dead leader holds a round's
    # assignment. At aiokafka's 10 s for both, runner kills a few seconds apart chained those
    # rounds into 30-45 s with tool calls unread (docs/reliability.md, runs 20-24, 32). A live
    # runner learns of a round at its next heartbeat and rejoins at once (its revocation only
    # commits), so 2.5 s is ample.
    session_timeout_ms: int = Field(default=6_000, ge=1_000)
    rebalance_timeout_ms: int = Field(default=2_500, ge=500)
    # When the runner is root, each session's tools run as their own uid (and gid), taken
    # from [sandbox_uid_base, sandbox_uid_base + sandbox_uid_count) by a hash of the session:
    # RLIMIT_NPROC counts per uid, so a fork bomb exhausts only its own session's processes.
    # The range must hold no real user of the host.
    sandbox_uid_base: int = Field(default=200_000, ge=1000)
    sandbox_uid_count: int = Field(default=100_000, ge=1)
    output_cap_bytes: int = Field(default=64 * 1024, ge=1024)
    max_concurrent_calls: int = Field(default=8, ge=1)
    # Offsets are committed at most this often while calls keep finishing (and on revoke and
    # shutdown). Each commit is a broker request and a write to its offsets topic; committed
    # behind every batch of calls that finished, that was 0.2 requests per tool step at 100
    # sessions. What it leaves uncommitted is at most this long of calls whose results are
    # already sent: a crash redelivers them and they replay from their records (executor.py).
    # Short, because KEDA scales runners on the group's committed lag (docs/operations.md):
    # a finished call counts there until it is committed.
    commit_every_s: float = Field(default=0.1, ge=0, le=10)
    max_timeout_s: float = Field(default=3600.0, gt=0)
    # On SIGTERM, calls still running after this long are left to their detached tools
    # and adopted by the next runner.
    shutdown_drain_s: float = Field(default=3.0, ge=0)
    # rlimits of every tool process.
    cpu_seconds: int = Field(default=300, ge=1)
    memory_bytes: int = Field(default=2 * 1024**3, ge=64 * 1024**2)
    file_size_bytes: int = Field(default=256 * 1024**2, ge=1024)
    nproc: int = Field(default=512, ge=8)
    # Fail closed: "on" refuses to start without working bubblewrap. "off" runs tools on the
    # host (host filesystem, network and pids, no per-session uid): development only.
    use_bwrap: Literal["on", "off"] = "on"
    # Each call's private /tmp (and /dev/shm) is a tmpfs of this size; its pages count
    # toward the session's memory limit where control groups are in force.
    tmp_bytes: int = Field(default=256 * 1024**2, ge=1024**2)
    # A session's work dir may hold this much; a call that grows it past that is stopped.
    work_dir_bytes: int = Field(default=1024**3, ge=1024**2)
    # Calls are refused, and a running one is stopped, when the sandboxes' filesystem has
    # less free space than this: the runner's own records must still fit.
    disk_reserve_bytes: int = Field(default=512 * 1024**2, ge=0)
    # Control groups (v1 or v2) the runner may create its session groups under; "" = none.
    # Detected at start; limits per session are memory_bytes and nproc.
    cgroup_parent: str = "wakeline"
    # A call issued longer ago than this when it reaches the runner is answered `expired`
    # instead of run: its brain has moved on or will issue it again when it wakes the session.
    # A call that already started (its bash tool launched) is adopted however old it is, never
    # reported expired; one that came in fresh never expires while it waits here (loop.py).
    stale_after_s: float = Field(default=300.0, gt=0)

    @field_validator("use_bwrap", mode="before")
    @classmethod
    def _no_auto(cls, value: object) -> object:
        if value == "auto":
            raise ValueError("use_bwrap=auto was removed: the runner fails closed. Use on (the default), "
                             "or off to run tools unsandboxed on the host for development")
        return value

    @field_validator("sandbox_root")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        # realpath, so the path a tool sees inside bwrap is the path confinement checks against.
        return Path(value).expanduser().resolve()

    @property
    def heartbeat_interval_ms(self) -> int:
        """A sixth of the session timeout, at most 1 s: within the rebalance timeout."""
        return max(200, min(1_000, self.session_timeout_ms // 6))
