"""Audit queries across every session of the caller's tenant, and the access log.

Auditors and admins only. Every request here is appended to `audit_access_log` (who,
which key, what they asked, when) before it is answered; admins read that log at
`GET /v1/audit/access-log`, itself recorded too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from wakeline.evidence import verify
from wakeline.evidence.checkpoints import load_key, read_anchor
from wakeline_gateway.audit.export import csv_header, csv_row
from wakeline_gateway.audit.query import AuditQuery, BadCursor, decode_cursor, encode_cursor
from wakeline_gateway.deps import AccessLogReader, AuditDep, Auditor, SettingsDep, StoreDep, record_audit_read
from wakeline_gateway.bounds import PG_BIGINT_MAX, Moment
from wakeline_gateway.errors import ApiError
from wakeline_gateway.problem import responses
from wakeline_gateway.routes.reads import signer_public_key
from wakeline_gateway.shapes.audit import (
    AccessLogPublic, AuditEventsPublic, AuditEventsQuery, AuditExportQuery, AuditSessionPublic,
    AuditSessionsPublic, Principal, TenantCostPublic, TenantCostRowPublic,
)

router = APIRouter(prefix="/v1/audit", tags=["audit"], responses=responses(401, 403, 422, 500, 503))


def to_audit_query(params: AuditEventsQuery) -> AuditQuery:
    actors = list(params.actor)
    if params.principal is not None:
        actors += [f"{kind}:{params.principal}" for kind in ("user", "human", "service")]
    try:
        after = decode_cursor(params.cursor) if params.cursor else None
    except BadCursor as err:
        raise ApiError(422, str(err), errors=[{"where": "query.cursor", "problem": "unrecognized cursor"}]) from err
    return AuditQuery(actors=tuple(dict.fromkeys(actors)), since=params.since, until=params.until,
                      types=tuple(params.type), tool=params.tool, session_id=params.session_id,
                      outcome=params.outcome, limit=params.limit, after=after)


async def audit_query(params: Annotated[AuditEventsQuery, Query()]) -> AuditQuery:
    return to_audit_query(params)


async def export_query(params: Annotated[AuditExportQuery, Query()]) -> tuple[AuditQuery, str]:
    return to_audit_query(params), params.format


QueryDep = Annotated[AuditQuery, Depends(audit_query)]
ExportDep = Annotated[tuple[AuditQuery, str], Depends(export_query)]


@router.get("/events", response_model=AuditEventsPublic)
async def audit_events(request: Request, caller: Auditor, audit: AuditDep, query: QueryDep) -> AuditEventsPublic:
    """Events of every session (deleted ones too) by actor, time, type, tool, session and
    outcome, in (ts, session_id, seq) order; page on with `cursor=next_cursor`."""
    await record_audit_read(request, caller, audit, query.described())
    events = await audit.events(caller.tenant, query)
    cursor = encode_cursor(events[-1]) if len(events) == query.limit else None
    return AuditEventsPublic(data=events, count=len(events), next_cursor=cursor)


@router.get("/events/export", response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {}, "text/csv": {}}}})
async def export_audit_events(request: Request, caller: Auditor, audit: AuditDep,
                              export: ExportDep) -> StreamingResponse:
    """Every match, streamed: JSONL (one canonical event per line) or CSV (one row per
    event, payload as JSON; cells a spreadsheet would run as a formula get a leading ')."""
    query, fmt = export
    await record_audit_read(request, caller, audit, {**query.described(), "format": fmt})

    async def body() -> AsyncIterator[str]:
        if fmt == "csv":
            yield csv_header()
        async for event in audit.every_event(caller.tenant, query):
            yield csv_row(event) if fmt == "csv" else event.model_dump_json() + "\n"

    media = "text/csv; charset=utf-8" if fmt == "csv" else "application/x-ndjson"
    return StreamingResponse(body(), media_type=media, headers={
        "Content-Disposition": f'attachment; filename="audit-events.{fmt}"'})


@router.get("/sessions", response_model=AuditSessionsPublic)
async def audit_sessions(request: Request, caller: Auditor, audit: AuditDep, query: QueryDep) -> AuditSessionsPublic:
    """The sessions the matching events belong to (e.g. every session a principal
    touched in a window), each with its first and last matching event."""
    await record_audit_read(request, caller, audit, query.described())
    rows = await audit.sessions(caller.tenant, query)
    data = [AuditSessionPublic.model_validate(dict(row)) for row in rows]
    return AuditSessionsPublic(data=data, count=len(data), truncated=len(data) == query.limit)


@router.get("/cost", response_model=TenantCostPublic)
async def tenant_cost(request: Request, caller: Auditor, audit: AuditDep, since: Moment | None = None,
                      until: Moment | None = None) -> TenantCostPublic:
    """Model calls and tokens of every session of the tenant in [since, until), per session
    owner (`actor`), model and UTC day; every token count the model recorded, cache included."""
    start, end = since or datetime(1970, 1, 1, tzinfo=UTC), until or datetime(9999, 1, 1, tzinfo=UTC)
    await record_audit_read(request, caller, audit, {"since": start.isoformat(), "until": end.isoformat()})
    rows = [TenantCostRowPublic.model_validate(r) for r in await audit.cost(caller.tenant, start, end)]
    totals: dict[str, int] = {}
    for row in rows:
        for name, value in row.tokens.items():
            totals[name] = totals.get(name, 0) + value
    return TenantCostPublic(since=start, until=end, data=rows, calls=sum(r.calls for r in rows), tokens=totals)


@router.get("/verify", response_model=verify.TenantReport)
async def verify_tenant(request: Request, caller: Auditor, audit: AuditDep, store: StoreDep,
                        settings: SettingsDep) -> verify.TenantReport:
    """Every session of the tenant: hash chains, event_keys, HMAC checkpoints and, with the
    signer's public key, the Ed25519-signed checkpoints as Postgres holds them (not the topic
    or the file sink: that cross-check is `python -m wakeline.evidence.verify --all`'s)."""
    public = signer_public_key(settings)
    await record_audit_read(request, caller, audit, {})
    key = load_key(settings.checkpoint_key_file, create=False)
    return await store.verify_tenant(caller.tenant, key, read_anchor(settings.checkpoint_dir, caller.tenant), public)


@router.get("/access-log", response_model=AccessLogPublic)
async def access_log(request: Request, caller: AccessLogReader, audit: AuditDep,
                     since: Moment | None = None, until: Moment | None = None,
                     principal: Annotated[Principal | None, Query()] = None,
                     after: Annotated[int | None, Query(ge=0, le=PG_BIGINT_MAX)] = None,
                     limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> AccessLogPublic:
    """Who read the audit trail, with what query, when (this read included)."""
    asked = {k: v for k, v in (("since", since), ("until", until), ("principal", principal),
                               ("after", after)) if v is not None}
    await record_audit_read(request, caller, audit, {k: str(v) for k, v in asked.items()})
    entries = await audit.access_log(caller.tenant, since, until, principal, limit, after)
    return AccessLogPublic(data=entries, count=len(entries),
                           next_after=entries[-1]["id"] if len(entries) == limit else None)

