"""A command a Kafka client sent straight to the inbox, over its tenant's rate quota. Pure: the
count is the brain's I/O (`wakeline.storage.quota_counts`); here is whether a command is
counted at all, the words of a refusal, and what the session records of it.

The gateway counts what it sends and marks it (`contract.quotas.ADMITTED_HEADER`); the brain
counts the rest, against the same counters, so HTTP and Kafka share one rate. A refused
command is dead-lettered with its reason and, where its session exists, recorded in it as
`input_rejected` `quota_exceeded`. A refused `create_session` has no session to be recorded
in: like the gateway's 429, nothing is created, and its dead letter says why; the same
command sent again once there is room creates the session.
"""

from __future__ import annotations

from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.contract.quotas import Refusal, exceeded, retry_after_s
from wakeline.log.chain import Draft
from wakeline.log.state import SessionState


def counted(state: SessionState, cmd: c.CommandBase) -> bool:
    """Not a command the session already has (redelivered after a crash: counted once), nor one
    claiming another tenant's session (refused `wrong_tenant` with no work, and counting it
    would tell the session's readers of the other tenant's quota)."""
    if state.has_seen(cmd.command_id):
        return False
    return state.status == "new" or cmd.tenant == state.tenant


def refusal_reason(state: SessionState, cmd: c.CommandBase, refusal: Refusal) -> str:
    """Names the quota and its limit, and when one more would fit; whether the same command may
    be sent again (nothing recorded it) or must be a new one (its id is in the log now)."""
    wait = retry_after_s(refusal)
    if state.status == "new":
        what = "the session was not created" if isinstance(cmd, c.CreateSession) else "nothing was done"
        return f"{exceeded(cmd.tenant, refusal)}; {what}: send the same command again in {wait} s"
    return f"{exceeded(cmd.tenant, refusal)}; not handled: send it again as a new command in {wait} s"


def refused_drafts(state: SessionState, cmd: c.CommandBase, reason: str) -> list[Draft]:
    """`input_rejected` `quota_exceeded` caused by the command; nothing for a session that does not exist yet."""
    if state.status == "new" or state.has_seen(cmd.command_id):
        return []
    rejected = e.InputRejectedPayload(command_id=cmd.command_id, code="quota_exceeded", reason=reason,
                                      expected_seq=cmd.expected_seq)
    return [Draft(payload=rejected, actor="system:brain", trust="instruction", causation_id=cmd.command_id)]
