"""`make bench`: starts the services, runs every benchmark, prints one JSON line each."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from bench import archiver_throughput, audit_query, tool_roundtrip, wake_time
from tests.e2e.stack import Stack

POLICIES = Path(__file__).resolve().parent / "policies"


def main() -> None:
    print(json.dumps({"bench": "machine", "cores": os.cpu_count(), "python": platform.python_version(),
                      "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}), flush=True)
    # first, before the services start: it needs only Postgres, and nothing else competes for the cores
    for line in asyncio.run(audit_query.run()):
        print(json.dumps(line), flush=True)
    stack = Stack(Path(tempfile.mkdtemp(prefix="wakeline-bench-")))
    for name in ("archiver", "runner", "brain"):
        stack.start(name, WAKELINE_POLICY_DIR=str(POLICIES))
    try:
        print(json.dumps(asyncio.run(tool_roundtrip.run())), flush=True)
        for line in asyncio.run(wake_time.run()):
            print(json.dumps(line), flush=True)
    finally:
        stack.stop_all()
    # last: it leaves 20k events that the next run's archiver must first skip as redeliveries
    print(json.dumps(asyncio.run(archiver_throughput.run())), flush=True)


if __name__ == "__main__":
    main()
