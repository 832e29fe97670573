"""What the frames of a session's live stream (`GET /v1/sessions/{id}/stream`) decode to.

An event of the log (`models.Event`, its `id:` is its seq), or with `deltas=true` a `Delta`:
a piece of the model's text as it is written, never stored and with no position in the log.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter

from wakeline_client.models import Event
from wakeline_client.sse import Frame

# Once one of these is sent, the stream has nothing more to say (`until_end`), or never will.
ENDINGS = ("session_ended", "deleted")
EVENT = TypeAdapter(Event)


class Delta(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    type: Literal["delta"] = "delta"
    session_id: str
    turn: int | None = None
    call: str | None = None
    index: int | None = None
    kind: str
    text: str = ""


def live_item(frame: Frame) -> Any:
    """A typed event or delta out of a frame."""
    if frame.event == "delta":
        return Delta.model_validate({**frame.json(), "type": "delta"})
    return EVENT.validate_python(frame.json())
