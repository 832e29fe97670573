"""`GET /v1/me`: who the presented key is; the console asks it once to know what to offer."""

from __future__ import annotations

from fastapi import APIRouter

from wakeline_gateway.auth import PERMISSIONS
from wakeline_gateway.deps import Authenticated
from wakeline_gateway.problem import responses
from wakeline_gateway.shapes.me import MePublic

router = APIRouter(prefix="/v1", tags=["auth"], responses=responses(401, 403, 422, 500, 503))


@router.get("/me", response_model=MePublic)
async def who_am_i(caller: Authenticated) -> MePublic:
    """The key's principal, role and tenant, and the actions the role allows. The server
    still checks every request: this only saves a client from offering what would be 403."""
    allowed = sorted(action for action, roles in PERMISSIONS.items() if caller.role in roles)
    return MePublic(principal=caller.principal, role=caller.role, tenant=caller.tenant, actor=caller.actor,
                    key_id=caller.key_id, actions=allowed)
