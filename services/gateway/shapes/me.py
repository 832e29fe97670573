"""Who the presented API key is (`GET /v1/me`)."""

from __future__ import annotations

from pydantic import BaseModel


class MePublic(BaseModel):
    """Who the presented key is, and which actions (auth.PERMISSIONS) its role may take."""

    principal: str
    role: str
    tenant: str
    actor: str
    key_id: str
    actions: list[str]
