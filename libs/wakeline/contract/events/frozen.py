"""`Frozen`: the base of every model the log and the commands are made of.

Frozen, so a sealed event (or a command on its way) cannot change under its hash; `extra`
forbidden, so a field nobody defined is an error, not a silently kept value.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
