"""Every route of the gateway, once: method, path, query parameters, body and answer models.

The resource classes call the gateway only through these; tests/unit/test_client_openapi.py
checks this table against clients/openapi.json (each operation there is here with the same
query parameters and schemas, and each is used by both clients). `command` marks the routes
that send a command and so take an `Idempotency-Key`.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from pydantic import BaseModel

from wakeline_client import models as m


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    query: tuple[str, ...] = ()
    body: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    command: bool = False

    def url(self, **path_params: str) -> str:
        return self.path.format(**{k: quote(str(v), safe="") for k, v in path_params.items()})


S = "/v1/sessions/{session_id}"
WAIT = ("wait",)
AUDIT_FILTERS = ("actor", "principal", "since", "until", "type", "tool", "session_id", "outcome", "limit", "cursor")


def _command(suffix: str, body: type[BaseModel] | None = None, query: tuple[str, ...] = WAIT) -> Operation:
    return Operation("POST", S + suffix, query, body, m.CommandPublic, command=True)


CREATE_SESSION = Operation("POST", "/v1/sessions", (), m.SessionCreate, m.CommandPublic, command=True)
LIST_SESSIONS = Operation("GET", "/v1/sessions", ("limit", "cursor", "status", "owner", "model", "q"),
                          response=m.SessionsPublic)
GET_SESSION = Operation("GET", S, response=m.SessionPublic)
DELETE_SESSION = Operation("DELETE", S, ("reason", "wait"), response=m.CommandPublic, command=True)
FORK_SESSION = _command("/fork", m.ForkCreate, query=())
SESSION_TREE = Operation("GET", S + "/tree", ("depth",), response=m.TreeNodePublic)
SESSION_COST = Operation("GET", S + "/cost", response=m.CostPublic)
READ_EVENTS = Operation("GET", S + "/events", ("after", "before", "limit", "type"), response=m.EventsPublic)
READ_TRANSCRIPT = Operation("GET", S + "/transcript", ("format",))
EXPORT_EVENTS = Operation("GET", S + "/export", ("inherited",))
REPLAY_SESSION = Operation("GET", S + "/replay", ("check",), response=m.ReplayPublic)
VERIFY_SESSION = Operation("GET", S + "/verify", response=m.Report)
INCLUSION_PROOF = Operation("GET", S + "/proof", response=m.ProofPublic)
STREAM_EVENTS = Operation("GET", S + "/stream", ("after", "until_end", "deltas"))

POST_MESSAGE = _command("/messages", m.MessageCreate)
WAKE_SESSION = _command("/wake")
CANCEL_SESSION = _command("/cancel")
APPROVE_TOOL_CALL = _command("/approvals/{tool_call_id}")
DENY_TOOL_CALL = _command("/denials/{tool_call_id}", m.DenialCreate)
TAKE_OVER = _command("/takeover")
HAND_BACK = _command("/handback")
SUBMIT_TOOL_RESULT = _command("/tool-results/{tool_call_id}", m.ToolResultCreate)
# The harness's streams of declared-tool calls: one session's, and the tenant's pool.
SESSION_TOOL_CALLS = Operation("GET", S + "/tool-calls/stream")
POOL_TOOL_CALLS = Operation("GET", "/v1/tool-calls/stream", ("tools", "lease_s", "max_in_flight", "until_empty"))

AUDIT_EVENTS = Operation("GET", "/v1/audit/events", AUDIT_FILTERS, response=m.AuditEventsPublic)
EXPORT_AUDIT_EVENTS = Operation("GET", "/v1/audit/events/export", (*AUDIT_FILTERS, "format"))
AUDIT_SESSIONS = Operation("GET", "/v1/audit/sessions", AUDIT_FILTERS, response=m.AuditSessionsPublic)
TENANT_COST = Operation("GET", "/v1/audit/cost", ("since", "until"), response=m.TenantCostPublic)
VERIFY_TENANT = Operation("GET", "/v1/audit/verify", response=m.TenantReport)
ACCESS_LOG = Operation("GET", "/v1/audit/access-log", ("since", "until", "principal", "after", "limit"),
                       response=m.AccessLogPublic)
READ_RETENTION = Operation("GET", "/v1/tenant/retention", response=m.RetentionPublic)
SET_RETENTION = Operation("PUT", "/v1/tenant/retention", body=m.RetentionSet, response=m.RetentionPublic)
READ_QUOTAS = Operation("GET", "/v1/quotas", response=m.QuotasPublic)
SET_QUOTAS = Operation("PUT", "/v1/quotas", body=m.QuotasSet, response=m.QuotasPublic)
HEALTHZ = Operation("GET", "/healthz", response=m.HealthPublic)
WHO_AM_I = Operation("GET", "/v1/me", response=m.MePublic)

ALL: dict[str, Operation] = {name: op for name, op in globals().items() if isinstance(op, Operation)}
