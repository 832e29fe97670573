"""`GET …/replay?check=true`: today's brain judges a recorded history (issue 11).

The decisions to check against are the brain's (`wakeline_brain.replay_check`), which the
gateway does not import (tests/unit/test_import_rules.py): the history is handed to
`python -m wakeline_brain.replay_check --jsonl - --json` in a process of its own, as
`wakeline replay --check` does, and its verdict comes back as data. One process per
request: the check is an audit read, not a hot path.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence

from pydantic import BaseModel

from wakeline.contract.events import Event
from wakeline_gateway.errors import ApiError

TIMEOUT_S = 120.0


class DivergencePublic(BaseModel):
    seq: int
    recorded: str  # what the log holds at seq
    now: str  # what today's code would do there


class ReplayCheckPublic(BaseModel):
    clean: bool
    events: int
    divergence: DivergencePublic | None = None


async def judge(events: Sequence[Event]) -> ReplayCheckPublic:
    history = "".join(event.model_dump_json() + "\n" for event in events).encode()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "wakeline_brain.replay_check", "--jsonl", "-", "--json",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(history), TIMEOUT_S)
    except TimeoutError as timeout:
        process.kill()
        await process.wait()
        raise ApiError(503, f"the replay check took longer than {TIMEOUT_S:.0f} s", code="replay_check_failed") \
            from timeout
    if process.returncode not in (0, 1) or not out.strip():
        reason = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise ApiError(503, f"the replay check did not run: {reason[0][:500]}", code="replay_check_failed")
    found = json.loads(out.decode().strip().splitlines()[-1])
    return ReplayCheckPublic(clean=found["clean"], events=found["events"], divergence=found["divergence"])
