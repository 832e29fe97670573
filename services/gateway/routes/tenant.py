"""The tenant's own settings: today its retention window."""

from __future__ import annotations

from fastapi import APIRouter

from wakeline_gateway.deps import AuditDep, RetentionReader, RetentionSetter
from wakeline_gateway.problem import responses
from wakeline_gateway.shapes.tenant import RetentionPublic, RetentionSet

router = APIRouter(prefix="/v1/tenant", tags=["tenant"], responses=responses(401, 403, 422, 500, 503))


@router.get("/retention", response_model=RetentionPublic)
async def read_retention(caller: RetentionReader, audit: AuditDep) -> RetentionPublic:
    """The tenant's retention window and every change to it (append-only)."""
    return RetentionPublic(**await audit.retention(caller.tenant))


@router.put("/retention", response_model=RetentionPublic, responses=responses(413))
async def set_retention(body: RetentionSet, caller: RetentionSetter, audit: AuditDep) -> RetentionPublic:
    """Sets the tenant's window (admin). The change and who made it are kept for good."""
    await audit.set_retention(caller.tenant, body.keep_days, caller.actor)
    return RetentionPublic(**await audit.retention(caller.tenant))
