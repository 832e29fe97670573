"""Which HTTP status answers a brain's rejection, by its code (`wakeline.contract.events.RejectionCode`).

404: the session is gone for this caller. 409: the command does not fit the session's
state now (`budget_exhausted`: a message to a session whose budget is spent, raising it too
little or not at all); `internal_error` is 409 too -- handling the input failed and the session's
input is parked (recorded in its log), which a wake or a later command can move past,
so it is a state of the session, not a fault in the request. 413/422: the request itself.
429: the brain refused a command from a Kafka client over its tenant's rate quota; the
gateway refuses its own before sending (quotas/gate.py), so it reads this one only in a log.
"""

from __future__ import annotations

from wakeline.contract.events import InputRejectedPayload

REJECTION_STATUS: dict[str, int] = {
    "conflict": 409,
    "wrong_tenant": 404,
    "deleted": 404,
    "unknown_session": 404,
    "already_exists": 409,
    "already_ended": 409,
    "not_awaiting_approval": 409,
    "not_pending": 409,
    "internal_error": 409,
    "too_large": 413,
    "malformed": 422,
    "budget_exhausted": 409,
    "quota_exceeded": 429,
}
# Events recorded before codes existed carry only words: read them as the gateway used to.
LEGACY_REASONS: tuple[tuple[str, str], ...] = (
    ("another tenant", "wrong_tenant"), ("deleted", "deleted"),
    ("already exists", "already_exists"), ("already", "already_ended"),
    ("not awaiting", "not_awaiting_approval"), ("not pending", "not_pending"),
)


def rejection_code(payload: InputRejectedPayload) -> str:
    if payload.code is not None:
        return payload.code
    reason = payload.reason
    if reason.startswith("conflict"):
        return "conflict"
    return next((code for words, code in LEGACY_REASONS if words in reason), "malformed")


def rejection_status(code: str) -> int:
    return REJECTION_STATUS.get(code, 422)
