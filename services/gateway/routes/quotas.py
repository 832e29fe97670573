"""The tenant's quotas: every key of the tenant reads them, its admin sets them, under the ceilings
the operator set (`wakeline quotas ceiling`, never through an API key)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from wakeline_gateway.auth import Caller
from wakeline_gateway.errors import ApiError
from wakeline_gateway.deps import QuotaReader, QuotasDep, QuotaSetter, SettingsDep
from wakeline_gateway.problem import responses
from wakeline.contract.quotas import ENFORCED, above_ceiling, effective, unit
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
    values before and after, and who made it are kept for good. A value above its ceiling (the
    operator's for the tenant, else the default) is refused, 422 `above_ceiling`, and nothing
    changes; one the tenant already had passes (the ceiling caps it anyway)."""
    asked = body.model_dump()
    stored = await quotas.read(caller.tenant)
    over = above_ceiling(asked, stored["own"], settings.quota_defaults(), stored["ceilings"])
    if over:
        quota, value, ceiling = over[0]
        raise ApiError(422, f"{value} {unit(quota)} is above this tenant's ceiling of {ceiling}, set by the "
                       "operator (or the default); ask the operator to raise it: nothing changed",
                       code="above_ceiling", quota=quota, asked=value, ceiling=ceiling,
                       above=[{"quota": q, "asked": v, "ceiling": c} for q, v, c in over])
    return public(caller, await quotas.set(caller.tenant, asked, caller.actor), settings)


def public(caller: Caller, stored: dict[str, Any], settings: GatewaySettings) -> QuotasPublic:
    defaults = settings.quota_defaults()
    return QuotasPublic(tenant=caller.tenant, effective=effective(stored["own"], defaults, stored["ceilings"]),
                        defaults=defaults, enforced=list(ENFORCED), **stored)
