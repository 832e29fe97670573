"""Whether a session handles a command a Kafka client other than the gateway sent (`mail.Uncounted`):
counted against its tenant's rate quotas first, in Postgres, with the gateway's counts
(`ActorDeps.admit`). One round trip per such command, none for a command the gateway marked
admitted (the router never wraps it) or the session already has. Over a quota, the command is
dead-lettered with its reason (`quota_exceeded: ...`) and its session records `input_rejected`
`quota_exceeded` (`wakeline.agent.quota_refusals`). A database that is restarting is waited
out, as a wake waits it out.
"""

from __future__ import annotations

from wakeline.agent.quota_refusals import counted, refusal_reason, refused_drafts
from wakeline.contract import commands as c
from wakeline.log.chain import Draft
from wakeline.log.state import SessionState
from wakeline_brain.actor_deps import ActorDeps
from wakeline_brain.log_reads import retried


async def refused(deps: ActorDeps, state: SessionState, cmd: c.CommandBase) -> list[Draft] | None:
    """None: admitted (or not counted), handle it. Else it was over a quota: dead-lettered, and
    what its session records of that (nothing for a session not created yet)."""
    admit = deps.admit
    if admit is None or not counted(state, cmd):
        return None
    refusal = await retried(f"counting command {cmd.command_id}", lambda: admit(cmd))
    if refusal is None:
        return None
    reason = refusal_reason(state, cmd, refusal)
    await deps.dead_letter(cmd, f"quota_exceeded: {reason}")
    return refused_drafts(state, cmd, reason)
