"""The gateway's settings (env prefix `WAKELINE_`, e.g. `WAKELINE_HTTP_PORT`).

`http_host`/`http_port` rather than `host`/`port`: the brain's `host` (its host name)
reads `WAKELINE_HOST`, and one environment may serve both.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from wakeline.evidence.checkpoints import CheckpointSettings
from wakeline.runtime.settings import CommonSettings
from wakeline.evidence.witnesses import EvidenceSettings
from wakeline.contract.quotas import QuotaDefaults

_CHECKPOINT_DEFAULTS = CheckpointSettings.model_fields
_EVIDENCE_DEFAULTS = EvidenceSettings.model_fields


class GatewaySettings(CommonSettings, QuotaDefaults):
    kafka_username: str = "gateway"  # writes the inbox, reads the events feed
    # Verify reads the checkpoint tool's key and anchor files: the same variables
    # (`WAKELINE_CHECKPOINT_KEY_FILE`, `WAKELINE_CHECKPOINT_DIR`) and defaults, read here.
    checkpoint_key_file: Path = _CHECKPOINT_DEFAULTS["checkpoint_key_file"].default
    checkpoint_dir: Path = _CHECKPOINT_DEFAULTS["checkpoint_dir"].default
    # And the signed checkpoints' public key (and pin), as `python -m wakeline.evidence.verify` reads
    # them: /verify then checks the signed rows in Postgres and counts a retention cut only
    # when a genuine statement signed it. It reads neither the topic nor the sink.
    evidence_public_key: str | None = None
    evidence_public_key_file: Path = _EVIDENCE_DEFAULTS["evidence_public_key_file"].default
    evidence_key_fingerprint: str | None = None
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=18080, ge=0, le=65535)
    # How long a request waits for the event that answers its command before a 202.
    wait_timeout_s: float = Field(default=15.0, ge=0, le=300)
    outcome_poll_s: float = Field(default=0.1, gt=0)
    # The events feed (feed.py) answers commands and live streams as the brain commits;
    # false falls back to polling Postgres every outcome_poll_s / stream_poll_s.
    events_feed: bool = True
    # While the feed runs, Postgres is still asked this often, for whatever the feed missed.
    outcome_recheck_s: float = Field(default=1.0, gt=0)
    stream_recheck_s: float = Field(default=1.0, gt=0)
    # Events a live stream may have waiting before its client is cut off as too slow.
    stream_queue_size: int = Field(default=1000, ge=1)
    # How long Kafka may take to acknowledge a command before the caller gets a 503 (a
    # producer that lost its broker would otherwise hold the request forever).
    submit_timeout_s: float = Field(default=10.0, gt=0, le=300)
    stream_poll_s: float = Field(default=0.2, gt=0)
    stream_heartbeat_s: float = Field(default=15.0, gt=0)
    # The harness pool (GET /v1/tool-calls/stream): a worker's lease on a call unless it asks
    # for another, and how often the gateway looks for calls on offer.
    tool_call_lease_s: float = Field(default=60.0, gt=0, le=3600)
    tool_call_poll_s: float = Field(default=0.1, gt=0)
    # False for a store built without deletion: DELETE answers 501 instead of pretending.
    deletion_enabled: bool = True
    default_model: str = "scripted:demo"
    pool_max_size: int = Field(default=10, ge=1)
    # How often `wakeline_tenant_sessions` is read from the sessions projection (one scan of
    # it, every replica: docs/operations.md).
    tenant_sessions_sample_s: float = Field(default=15.0, gt=0)
    # Each tenant's quotas unless its admin set its own: `QuotaDefaults` (`WAKELINE_QUOTA_*`), read
    # by the brains too (set them alike for gateways and brains; docs/operations.md).
