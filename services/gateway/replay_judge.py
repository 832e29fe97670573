"""`GET …/replay?check=true`: today's decisions judge a recorded history (issue 11).

The decisions are the agent's, library code (`wakeline.agent.replay_check`), so the check
runs in-process on the history the route read, and its verdict comes back as data. It is
linear in the history and all CPU: it runs in a worker thread, so the event loop goes on
serving while it works, bounded by `TIMEOUT_S`. A check past the bound is answered 503 and
left to finish in its thread (no thread can be stopped), as an audit read, not a hot path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import BaseModel

from wakeline.agent.replay_check import verdict
from wakeline.contract.events import Event
from wakeline.contract.tools import tool_schemas
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
    session_id = events[-1].session_id if events else "?"
    try:
        found = await asyncio.wait_for(asyncio.to_thread(verdict, session_id, list(events), tool_schemas()),
                                       TIMEOUT_S)
    except TimeoutError as timeout:
        raise ApiError(503, f"the replay check took longer than {TIMEOUT_S:.0f} s", code="replay_check_failed") \
            from timeout
    except Exception as err:  # a bug in the check is the check's failure, never the route's 500
        reason = f"{type(err).__name__}: {err}".strip().splitlines()[-1]
        raise ApiError(503, f"the replay check did not run: {reason[:500]}", code="replay_check_failed") from err
    return ReplayCheckPublic(clean=found["clean"], events=found["events"], divergence=found["divergence"])
