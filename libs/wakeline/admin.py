"""`python -m wakeline.admin topics`: creates the wakeline topics (idempotent).

Migrations are `python -m wakeline.migrate`; this module only knows Kafka.
"""

from __future__ import annotations

import asyncio
import sys

from wakeline.kafka_io import ensure_topics
from wakeline.settings import CommonSettings


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["topics"]:
        print("usage: python -m wakeline.admin topics", file=sys.stderr)
        return 2
    settings = CommonSettings()
    created = asyncio.run(ensure_topics(settings))
    print(f"topics: {settings.partitions} partitions each; created {created or 'none (all present)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
