"""RunnerSettings: where sandboxes live, who tools run as, and what they may use."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from wakeline.settings import CommonSettings


class RunnerSettings(CommonSettings):
    kafka_username: str = "runner"
    # Relative paths are taken from the working directory at start (the repo for `make`).
    sandbox_root: Path = Path(".data/sandboxes")
    group_id: str = "wakeline-runner"
    host: str = Field(default_factory=socket.gethostname)
    # Tools run as this uid/gid (nobody) when the runner is root.
    sandbox_uid: int = 65534
    sandbox_gid: int = 65534
    output_cap_bytes: int = Field(default=64 * 1024, ge=1024)
    max_concurrent_calls: int = Field(default=8, ge=1)
    max_timeout_s: float = Field(default=3600.0, gt=0)
    # On SIGTERM, calls still running after this long are left to their detached tools
    # and adopted by the next runner.
    shutdown_drain_s: float = Field(default=3.0, ge=0)
    # rlimits of every tool process.
    cpu_seconds: int = Field(default=300, ge=1)
    memory_bytes: int = Field(default=2 * 1024**3, ge=64 * 1024**2)
    file_size_bytes: int = Field(default=256 * 1024**2, ge=1024)
    nproc: int = Field(default=512, ge=8)
    use_bwrap: Literal["auto", "on", "off"] = "auto"
    # A call issued longer ago than this is answered `expired` instead of run: its brain
    # has moved on or will issue it again when it wakes the session. A call that already
    # started (its bash tool launched) is adopted however old it is, never reported expired.
    stale_after_s: float = Field(default=300.0, gt=0)

    @field_validator("sandbox_root")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        # realpath, so the path a tool sees inside bwrap is the path confinement checks against.
        return Path(value).expanduser().resolve()
