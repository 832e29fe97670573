"""Who is calling and what they may do: the rules; `deps.permit` applies them.

Every route asks for `deps.permit(<action>)`; it authenticates the `Authorization: Bearer`
key (401 when missing, malformed, unknown or revoked) and refuses a role the action does
not list (403). Which *session* a caller may touch is decided by Postgres as well: a
`user`'s reads carry `viewer` and row-level security shows only the sessions they own,
so another user's session is 404, exactly like one that does not exist.
"""

from __future__ import annotations

from typing import NamedTuple

from wakeline.storage import api_keys
from wakeline.storage.event_store import Scope
from wakeline_gateway.errors import ApiError

# action -> roles allowed. Ownership of the session is checked on top (deps.py).
PERMISSIONS: dict[str, frozenset[str]] = {
    "session.create": frozenset({"user", "admin", "service"}),
    "session.read": frozenset({"user", "auditor", "admin", "service"}),
    "session.write": frozenset({"user", "admin", "service"}),
    "session.delete": frozenset({"user", "admin"}),
    "audit.read": frozenset({"auditor", "admin"}),
    "audit.access_log": frozenset({"admin"}),
    "tenant.retention.read": frozenset({"auditor", "admin"}),
    "tenant.retention.set": frozenset({"admin"}),
    # Every key may see the quotas its tenant runs under; only an admin changes them.
    "tenant.quotas.read": frozenset({"user", "auditor", "admin", "service"}),
    "tenant.quotas.set": frozenset({"admin"}),
    # A pool of harness workers answers declared tools' calls across the tenant's sessions.
    "tool_calls.pool": frozenset({"service"}),
}
ACTIONS = {
    "session.create": "create sessions", "session.read": "read sessions",
    "session.write": "write to sessions", "session.delete": "delete sessions",
    "audit.read": "run audit queries", "audit.access_log": "read the audit access log",
    "tenant.retention.read": "read the retention window", "tenant.retention.set": "set the retention window",
    "tenant.quotas.read": "read the tenant's quotas", "tenant.quotas.set": "set the tenant's quotas",
    "tool_calls.pool": "take tool calls across the tenant's sessions",
}
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="wakeline"'}


class Caller(NamedTuple):
    tenant: str
    principal: str
    role: str
    key_id: str

    @property
    def actor(self) -> str:
        """What events this caller causes are attributed to."""
        return f"service:{self.principal}" if self.role == "service" else f"user:{self.principal}"

    @property
    def hands(self) -> str:
        """The actor when the caller acts as the hands (takes over, hands back, answers a
        tool call): `human:<principal>` for a person's key; a service stays
        `service:<principal>`, so an integration's answers never pass for a person's."""
        return self.actor if self.role == "service" else f"human:{self.principal}"

    @property
    def scope(self) -> Scope:
        """A user sees only sessions it owns; every other role sees its whole tenant."""
        return Scope(self.tenant, self.actor if self.role == "user" else None)

    def logged_on(self, owner: str) -> bool:
        """Whether touching a session of `owner` goes to the access log: it does for
        every caller that sees the whole tenant (auditor, admin, service) on a session
        it does not own. A user never reaches another's session (404), so never logs."""
        return self.scope.viewer is None and owner != self.actor

    def may_write(self, owner: str) -> bool:
        return self.role == "service" or owner == self.actor


def unauthorized(problem: str) -> ApiError:
    return ApiError(401, f"{problem}; send `Authorization: Bearer wkl_...` (see `wakeline keys create`)",
                    headers=CHALLENGE)


def presented_key(authorization: str | None) -> api_keys.ParsedKey:
    """The key in an `Authorization` header, or 401. Never echoed back."""
    if authorization is None:
        raise unauthorized("no API key")
    scheme, _, token = authorization.partition(" ")
    parsed = api_keys.parse_key(token) if scheme.lower() == "bearer" else None
    if parsed is None:
        raise unauthorized("the Authorization header is not a Wakeline API key")
    return parsed


def caller_for(presented: api_keys.ParsedKey, stored: api_keys.StoredKey | None) -> Caller:
    if not api_keys.secret_matches(presented.secret, stored):
        raise unauthorized("unknown API key")
    if stored.revoked:
        raise unauthorized(f"API key {presented.key_id} has been revoked")
    return Caller(stored.tenant, stored.principal, stored.role, presented.key_id)


def check_role(caller: Caller, action: str) -> Caller:
    allowed = PERMISSIONS[action]
    if caller.role not in allowed:
        raise ApiError(403, f"role {caller.role!r} may not {ACTIONS[action]}; "
                            f"roles that may: {', '.join(sorted(allowed))}")
    return caller
