"""The tenant's quotas: every key of the tenant reads them, its admin sets them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from wakeline_gateway.auth import Caller
from wakeline_gateway.deps import QuotaReader, QuotasDep, QuotaSetter, SettingsDep
from wakeline_gateway.problem import responses
from wakeline.contract.quotas import ENFORCED, effective
from wakeline_gateway.settings import GatewaySettings
from wakeline_gateway.shapes.quotas import QuotasPublic, QuotasSet

router = APIRouter(prefix="/v1", tags=["quotas"], responses=responses(401, 403, 422, 500, 503))


@router.get("/quotas", response_model=QuotasPublic)
async def read_quotas(caller: QuotaReader, quotas: QuotasDep, settings: SettingsDep) -> QuotasPublic:
    """The quotas the key's tenant runs under, the defaults, and the changes made to them."""
    return public(caller, await quotas.read(caller.tenant), settings)


@router.put("/quotas", response_model=QuotasPublic, responses=responses(413))
async def set_quotas(body: QuotasSet, caller: QuotaSetter, quotas: QuotasDep, settings: SettingsDep) -> QuotasPublic:
    """Replaces the tenant's quotas (admin); one left out goes back to the default. The change, the
    values before and after, and who made it are kept for good."""
    return public(caller, await quotas.set(caller.tenant, body.model_dump(), caller.actor), settings)


def public(caller: Caller, stored: dict[str, Any], settings: GatewaySettings) -> QuotasPublic:
    defaults = settings.quota_defaults()
    return QuotasPublic(tenant=caller.tenant, effective=effective(stored["own"], defaults), defaults=defaults,
                        enforced=list(ENFORCED), **stored)
