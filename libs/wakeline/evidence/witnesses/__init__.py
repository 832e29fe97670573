"""The three places a signed checkpoint is kept, and reading them back for verify.

Postgres (`signed_checkpoints`, with the heads: postgres.py), the Kafka topic
`<prefix>.checkpoints` (one partition, kept forever, keyed by tenant: topic.py) and an
append-only file sink (one JSONL file per tenant under a directory that can be another
machine's mount: sink.py). The signer writes all three, Postgres first: the statement's
number is unique per tenant there, so two signers racing for the same number lose one
insert instead of forking the chain. gathering.py reads all three back; what they hold is
compared in cross_check.py. Where they and the public key are configured: settings.py.
Every name is importable from here (`witnesses.insert`, `witnesses.gather`).
"""

from __future__ import annotations

from wakeline.evidence.witnesses.settings import EvidenceSettings, KeySettings, public_key
from wakeline.evidence.witnesses.postgres import (
    insert, newest_genuine, newest_postgres, newest_signed, read_postgres, signed_cuts,
)
from wakeline.evidence.witnesses.sink import append_sink, read_sink, sink_path
from wakeline.evidence.witnesses.topic import TOPIC_CONFIG, ensure_topic, publish, read_topic
from wakeline.evidence.witnesses.gathering import gather, gather_postgres

__all__ = [
    "EvidenceSettings", "KeySettings", "TOPIC_CONFIG", "append_sink", "ensure_topic", "gather", "gather_postgres",
    "insert", "newest_genuine", "newest_postgres", "newest_signed", "public_key", "publish", "read_postgres",
    "read_sink", "read_topic", "signed_cuts", "sink_path",
]
