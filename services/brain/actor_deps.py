"""What a session actor is given (`ActorDeps`), and what its pieces read of it (`ActorView`).

`ActorDeps` is every I/O the actor does, as callables the router (or a test) passes in, and
its limits. The pieces (`session_log`, `model_driver`, `compaction_counts`, `tool_calls`,
`log_reads`) hold the actor as an `ActorView` and read its tenant and deps when they act, so
the owner a wake learns from the log, or deps replaced before a run, reach every piece.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from wakeline.agent.model import Model
from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.contract.deltas import ModelDelta
from wakeline.contract.prices import DEFAULT_TABLE, PriceTable
from wakeline.contract.quotas import Refusal
from wakeline.runtime.fair_slots import FairSlots
from wakeline.storage.turn_slots import TurnSlots
from wakeline_brain.tenant_quotas import TenantQuotas
from wakeline_brain.writer import PartitionWriter

_NO_LIMIT = nullcontext()


@dataclass
class ActorDeps:
    host: str
    idle_evict_s: float
    load: Callable[[str, str, int, bool], Awaitable[list[e.Event]]]  # (session, tenant, partition, whole)
    model_for: Callable[[str], Model]
    tools: list[dict[str, Any]]
    release: Callable[[list[Any]], None]  # the tokens of inputs now settled
    dead_letter: Callable[[Any, str], Awaitable[None]]
    now: Callable[[], Any]
    new_id: Callable[[], str]
    max_record_bytes: int = 1_000_000
    # A snapshot event every this many events, and on eviction once this many came since
    # the last: a wake then folds at most about this many, not the whole log.
    snapshot_every: int = 1000
    snapshot_on_evict_after: int = 100
    # (parent, tenant, upto) -> the parent's history a fork inherits; None: this brain forks nothing.
    load_prefix: Callable[[str, str, int], Awaitable[list[e.Event]]] | None = None
    # At most this many model calls at once across the brain's sessions (None: no bound):
    # a burst of sessions queues here instead of piling onto an overloaded API, each tenant
    # in its turn, so one tenant's burst does not hold up another's next call (issue 34).
    model_slots: FairSlots | None = None
    # A turn whose model call failed with a passing cause (overload, rate limit) waits
    # `model_retry_s * 2**(attempt-1)`, at most `model_retry_max_s`, then calls again.
    model_retry_s: float = 2.0
    model_retry_max_s: float = 60.0
    # Live text of replies being written: to viewers (the model-deltas topic), never the log.
    publish_delta: Callable[[ModelDelta], Awaitable[None]] | None = None
    # How long `Sequencer.advance` waits for a model call it started before writing what came
    # before it: a reply within it rides in the same transaction (BrainSettings.model_linger_ms).
    model_linger_s: float = 0.0
    # Where a session given a budget (created, forked or raised) binds its model's price from.
    prices: PriceTable = DEFAULT_TABLE
    # The running-sessions quota's slots (issue 34; None: no quota), and how the sessions a
    # slot was granted to in their absence are woken: (tenant, session ids) -> `wake_session`
    # on the inbox. A wake lost on the way is sent again by the brain's sweep.
    turn_slots: TurnSlots | None = None
    wake_sessions: Callable[[str, tuple[str, ...]], Awaitable[None]] | None = None
    # Counts a command a Kafka client other than the gateway sent against its tenant's rate
    # quotas (`wakeline.storage.quota_counts.QuotaCounts.admit`): its Refusal, or None. None: not counted.
    admit: Callable[[c.CommandBase], Awaitable[Refusal | None]] | None = None
    # The tenant's tokens per day, checked before each model call and counted after it, and
    # its tool calls in flight, carried to the runners (None: neither is enforced).
    tenant_quotas: TenantQuotas | None = None

    def model_slot(self, tenant: str) -> AbstractAsyncContextManager[Any]:
        """One of the brain's `model_slots` for a request to the model's API, in `tenant`'s turn, or no bound."""
        return self.model_slots.slot(tenant) if self.model_slots is not None else _NO_LIMIT


class ActorView(Protocol):
    """The session actor as its pieces see it."""

    session_id: str
    tenant: str  # the log's owner once woken, not an input's claim
    partition: int
    writer: PartitionWriter
    deps: ActorDeps
    mailbox: asyncio.Queue[Any]
