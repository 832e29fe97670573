"""What a session actor's mailbox carries.

Inputs come from the router as `(input, token)`: a command, a tool result, a command
`Uncounted` (from a Kafka client other than the gateway: to count against its tenant's rate
quotas first), or a `MalformedInput` where the record could not be read but names its
session. The `token` is opaque to the actor, handed back to `ActorDeps.release` once the
input is settled. The rest is the actor's own mail: a model's answer or summary, a backoff
or a harness's wait run out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wakeline.agent.model import ModelReply
from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.log.chain import Draft

Token = Any


@dataclass(frozen=True)
class MalformedInput:
    command_id: str
    reason: str
    code: e.RejectionCode = "malformed"


@dataclass(frozen=True)
class Uncounted:
    """A command no gateway counted against its tenant's rate quotas (the record has no
    `wakeline-admitted` header): the actor counts it before handling it (quota_admission.py)."""

    command: c.CommandBase


@dataclass
class ModelDone:
    turn: int
    reply: ModelReply | None
    error: str | None = None
    retryable: bool = False  # the cause passes: park the turn `waiting_model`, do not end it
    compaction: Draft | None = None  # the model's token count says: compact first, then call
    ended: Draft | None = None  # not called: the tenant's day of tokens is used (agent.quota)


@dataclass
class SummaryDone:
    """A planned compaction, with the model's summary (or the mechanical one where that
    call failed) and, where the model counts tokens, its count of what is left."""

    turn: int
    seq: int
    compaction: Draft


@dataclass(frozen=True)
class RetryModel:
    """The backoff after a `model_unavailable` is over: call the model again."""


@dataclass(frozen=True)
class ClientTimeout:
    """A declared tool's call waited `client_tool_timeout_s` for the harness."""

    tool_call_id: str
