"""`python -m wakeline.ops.admin topics|acls`: creates the wakeline topics, or the Kafka ACLs
of each service's principal (both idempotent; both as `admin`, the super user).

Topics are created with the partition count, replication factor, min.insync.replicas,
retention and max.message.bytes from the settings; an existing topic that contradicts
them is reported as a warning (topic, key, found, wanted), see `topic_admin.ensure_topics`.
The ACLs are `kafka_acls.GRANTS`. Both act on the names of the topic prefix in force
(`WAKELINE_TOPIC_PREFIX`, see `wakeline.contract.topics`), so `make test` creates the suite's
topics and grants beside the demo's. Migrations are `python -m wakeline.storage.migrate`; this
module only knows Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from wakeline.ops.kafka_acls import create_acls
from wakeline.transport.topic_admin import ensure_topics
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import CHECKPOINTS, PREFIX
from wakeline.evidence.witnesses import ensure_topic

USAGE = ("usage: python -m wakeline.ops.admin topics [--fix] | acls   (--fix: set retention.ms and "
         "min.insync.replicas of existing topics to the settings)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["acls"]:
        count = asyncio.run(create_acls(CommonSettings()))
        print(f"acls: {count} bindings for brain, runner, archiver and gateway on prefix {PREFIX} "
              "(kafka_acls.GRANTS)")
        return 0
    if argv not in (["topics"], ["topics", "--fix"]):
        print(USAGE, file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="topics: %(levelname)s %(message)s")
    settings = CommonSettings()
    created = asyncio.run(ensure_topics(settings, fix=argv[1:] == ["--fix"]))
    print(f"topics {PREFIX}.*: {settings.partitions} partitions, replication {settings.replication_factor}, "
          f"min.insync.replicas {settings.min_insync_replicas}, retention.ms {settings.events_retention_ms} "
          f"({settings.deltas_retention_ms} for the model deltas); "
          f"created {created or 'none (all present)'}")
    made = asyncio.run(ensure_topic(settings))
    print(f"topic {CHECKPOINTS}: 1 partition, kept forever, not compacted; {'created' if made else 'present'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
