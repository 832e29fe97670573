"""What every request shape derives from: `Strict` for query parameters, `Body` for JSON bodies."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Body(BaseModel):
    """A JSON request body: no unknown fields, and no coercion (`"wait": 0` is not a bool)."""

    model_config = ConfigDict(extra="forbid", strict=True)
