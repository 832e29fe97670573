"""The brain's settings (env prefix `WAKELINE_`; the Anthropic key also as `ANTHROPIC_API_KEY`)."""

from __future__ import annotations

import socket
from pathlib import Path

from pydantic import AliasChoices, Field

from wakeline.storage.archive_position import ARCHIVER_GROUP
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.quotas import QuotaDefaults
from wakeline.contract.topics import BRAIN_GROUP


class BrainSettings(CommonSettings, QuotaDefaults):
    """`QuotaDefaults` (`WAKELINE_QUOTA_*`, the gateway's too): what a tenant with no quota of its
    own is held to when a Kafka client other than the gateway sends commands to the inbox."""

    kafka_username: str = "brain"  # the only principal that may write wakeline.events
    group_id: str = BRAIN_GROUP  # `<prefix>-brain`; its transactional ids are `<group_id>-p<p>`
    # The archive a wake reads: the same `WAKELINE_ARCHIVER_GROUP` the archiver runs under.
    archiver_group: str = ARCHIVER_GROUP
    host: str = Field(default_factory=socket.gethostname)
    idle_evict_s: float = 300.0
    # The brain's Postgres connections: wakes, running-session slots, quota counts. At 4, a
    # steady tenant's turn start waited 78 ms on average for one while another tenant's 300 new
    # sessions woke (27 ms at 8, 18 ms at 12; docs/benchmarks.md, "Fair share").
    pool_max_size: int = Field(default=8, ge=1)
    # The sessions at work the deployment shares fairly across tenants (every brain must say the
    # same): while more than one tenant holds or waits for a running-session slot, each is held to
    # the larger of an equal share of this and what the others leave of it (at least one), under
    # its own quota (migration 0032). A tenant alone is held to its quota only. Set it to about
    # what the deployment runs at once before its steps slow down (on the bench's 2 cores, ~20
    # no-op sessions saturate it); set too low, busy tenants are held to small shares of it.
    # None: each tenant is held to its own quota only.
    running_sessions_total: int | None = Field(default=None, ge=1)
    # A `snapshot` event every this many events of a session, and when an idle session is
    # evicted once this many came since its last: a wake reads and folds only what follows
    # its newest snapshot. Small sessions fold fast from the start and get none.
    snapshot_every: int = Field(default=1000, ge=1)
    snapshot_on_evict_after: int = Field(default=100, ge=1)
    # Failure detection for the brain group: a killed brain's partitions are owned again
    # about this long after it died. Lower means faster recovery but a brain whose event
    # loop stalls this long is taken for dead.
    session_timeout_ms: int = 6_000
    # How long a rebalance waits for each member to join it, and for its leader to hand out
    # the assignment, before it goes on without them. A brain killed while a rebalance is on
    # (or the leader it elected) held the round this long, not for the session timeout: with
    # brains replaced under new names every few seconds those rounds chained (issue 37). A
    # live brain rejoins within a heartbeat (heartbeat_interval_ms) plus its revocation,
    # which keeps everything until the assignment says what moved. None: the session timeout.
    rebalance_timeout_ms: int | None = Field(default=2_500, ge=500)
    # Static group membership (KIP-345) as `<group_id>-<host>`: a brain restarted under
    # the same host name takes its partitions back at once instead of waiting out the
    # dead incarnation's session timeout. The price: two live brains must never share a
    # host name (the broker fences one), and a stopped brain's partitions wait for the
    # session timeout before they move (a static member does not leave the group).
    static_membership: bool = True
    # Dead brains found by their Postgres lease (dead_peers.py; static membership only): every
    # this often each brain checks for leases whose session ended, and removes a brain whose
    # lease has been gone `peer_lapse_s` from the group, instead of the group's waiting out its
    # session timeout. The wait is what a brain restarted under its own name has to take its
    # lease back and keep its partitions (about 1.5 s from a kill in make chaos). None: off.
    peer_check_s: float = Field(default=0.5, gt=0, le=60)
    peer_lapse_s: float | None = Field(default=2.0, ge=0, le=600)
    # How long a partition producer waits before retrying a refused request. A transaction
    # that starts right after the previous one committed often finds that commit's markers
    # still being written: the coordinator answers its first request (AddOffsetsToTxn, the
    # consumer offsets go first) CONCURRENT_TRANSACTIONS, and aiokafka waits this long
    # before asking again. At aiokafka's 100 ms that wait was the tool round trip's p99 at
    # 3 sessions (76 ms against 40 at 20 ms, docs/history/benchmarks.md); the markers take a few ms.
    # It is also aiokafka's wait before any other retried request of these producers (a
    # produce during a leader move, a metadata refresh while the broker is down), which a
    # few ms would turn into a busy loop: so it stays at 20.
    txn_retry_backoff_ms: int = Field(default=20, ge=1)
    # The wait after a refused first AddPartitionsToTxn of a transaction (aiokafka's module
    # constant BACKOFF_OVERRIDE, 20 ms of its own; set in app.py): the same refusal, on the
    # transaction's first record when no offsets go first, which is most transactions. The
    # markers take a few ms, so a 20 ms wait was most of the round trip's tail: at 3 sessions
    # 2 ms against 20 took p90 from 43 to 21 ms and p99 from 51 to 36 (540 round trips
    # each, docs/history/benchmarks.md). Only this refusal waits this little, so nothing spins.
    txn_concurrent_retry_ms: int = Field(default=2, ge=1)
    # How long a session waits for a model call it just started before writing the events
    # that came before it (sequencer.Sequencer.advance): a reply within it rides in the same
    # transaction, so a fast model's step costs one transaction where it cost two, the
    # second right behind the first. Claude answers in far more than this; for it the wait
    # only delays a tool result's visibility by this much, beside a call already running.
    # 0: never wait.
    model_linger_ms: float = Field(default=5.0, ge=0, le=1000)
    # At most this often do a busy partition's transactions carry its consumer offsets (and
    # in every record-less commit of a quiet moment): offsets cost a transaction two more
    # requests, which every tool round trip waited for. The price: a crash redelivers up to
    # this long of inputs already in the log, which the sessions drop as repeats
    # (writer.PartitionWriter). 0: every transaction carries them.
    offsets_every_s: float = Field(default=1.0, ge=0, le=60)
    # How long taking a partition waits for a transaction from before our fence to get its
    # marker (partitions.PartitionSet._settled); past it the take is retried from the start.
    # Above the partition producers' transaction timeout (60 s), by which the broker aborts
    # any transaction left open.
    settle_timeout_s: float = Field(default=75.0, gt=0)
    # How long that wait goes on before the writer commits a record-less transaction of
    # its own on the held partitions, which ends one of its producer id that nothing else
    # will (partitions.PartitionSet._settled). Markers from the fence land in milliseconds;
    # a restarted broker finishing a commit, in a few seconds.
    settle_probe_after_s: float = Field(default=5.0, ge=0)
    # How often a live writer's events and tool-calls partitions are checked for a
    # transaction of its producer id that nothing will end (partitions.PartitionSet._watch):
    # held at the same read-committed end at two checks in a row, it is ended.
    stray_check_s: float = Field(default=5.0, gt=0)

    @property
    def heartbeat_interval_ms(self) -> int:
        """A sixth of the session timeout, at most 1 s: a live brain learns of a rebalance at its
        next heartbeat and must join within the rebalance timeout (2.5 s), whatever the
        session timeout (a 40 s one gave 6.7 s heartbeats, and live brains missed rounds)."""
        return max(200, min(1_000, self.session_timeout_ms // 6))

    @property
    def group_instance_id(self) -> str | None:
        return f"{self.group_id}-{self.host}" if self.static_membership else None
    # Where `scripted:<policy>` files are; None: the ones shipped in the package (scripted.py).
    policy_dir: Path | None = None
    anthropic_api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("WAKELINE_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"))
    anthropic_base_url: str | None = None
    # The SDK's own retries of one call (429, 529, 5xx; `retry-after` honoured) before the
    # turn is parked `waiting_model`.
    anthropic_max_retries: int = Field(default=4, ge=0, le=20)
    # cache_control breakpoints on Claude requests (claude.cache_breakpoints); off only to
    # measure what they save (bench/prompt_cache.py).
    anthropic_prompt_cache: bool = True
    # How long a brain trusts a tenant's token count under its quota before reading it again
    # (tenant_quotas.TenantQuotas): other brains' calls of this long may go past the quota.
    quota_fresh_s: float = Field(default=2.0, ge=0, le=3600)

    # At most this many model calls at once in this brain, across its sessions.
    model_concurrency: int = Field(default=32, ge=1, le=10_000)
    # A parked turn calls again after model_retry_s * 2**(attempt-1), at most model_retry_max_s.
    model_retry_s: float = Field(default=2.0, gt=0, le=3600)
    model_retry_max_s: float = Field(default=60.0, gt=0, le=3600)
    # How often the brain puts right what a crash left of the slots (a slot held by a session
    # out of its turn, a wake lost): `sweep_turn_slots`, migration 0027.
    turn_slot_sweep_s: float = Field(default=10.0, gt=0, le=3600)
