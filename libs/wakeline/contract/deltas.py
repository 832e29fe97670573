"""`ModelDelta`: a piece of a model reply as it streams, for live viewers; never the log.

The brain publishes them on the model-deltas topic (`topics.DELTAS`, keyed and partitioned
by session, short retention, never archived) while a model call streams; the gateway's
deltas feed hands them to the session's live streams. The log records only the finished
`model_turn`. `call` names one model call: a call redone (after a cut stream, a parked
turn or a brain killed mid-stream) comes with a new `call` and a `start` delta first, so
a viewer drops the partial text it holds and shows the turn restarting.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from wakeline.contract.events import Frozen

DeltaKind = Literal["start", "text", "thinking"]


class ModelDelta(Frozen):
    session_id: str = Field(min_length=1, max_length=200)
    tenant: str = Field(min_length=1, max_length=200)
    turn: int = Field(ge=0)
    call: str = Field(min_length=1, max_length=100)  # one model call; a redone turn has a new one
    index: int = Field(ge=0)  # order within the call: `start` is 0
    kind: DeltaKind
    text: str = ""
