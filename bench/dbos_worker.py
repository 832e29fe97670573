"""The peer's process for `bench.dbos_peer`: DBOS workflows of no-op steps, run in the peer's own
virtualenv (only the standard library and `dbos` here; nothing of Wakeline's is importable).

Spoken to over its pipes, one JSON line each way: stdin's first line is the run
({"url", "workflows", "steps", "warm_up", "rounds"}); it launches DBOS, runs the warm-up
workflows and says `ready`; then for each `go` line it starts `workflows` workflows at once,
waits for every result and says `done`. Anything a library prints goes to stderr, so stdout
carries only these lines.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
import time

from dbos import DBOS, DBOSConfig


@DBOS.step()
def noop_step() -> None:
    return None


@DBOS.workflow()
def noop_workflow(steps: int) -> int:
    for _ in range(steps):
        noop_step()
    return steps


def run_round(workflows: int, steps: int) -> int:
    """`workflows` workflows started together (each on DBOS's executor thread), every result waited for."""
    handles = [DBOS.start_workflow(noop_workflow, steps) for _ in range(workflows)]
    return sum(handle.get_result() for handle in handles)


def main() -> None:
    say = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    run = json.loads(sys.stdin.readline())
    config: DBOSConfig = {"name": "wakeline-dbos-peer", "system_database_url": run["url"], "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()
    try:
        run_round(run["warm_up"], run["steps"])
        say.write(json.dumps({"ready": True, "dbos": importlib.metadata.version("dbos")}) + "\n")
        for _ in range(run["rounds"]):
            if sys.stdin.readline().strip() != "go":
                return
            started = time.monotonic()
            steps = run_round(run["workflows"], run["steps"])
            say.write(json.dumps({"done": True, "steps": steps, "s": round(time.monotonic() - started, 3)}) + "\n")
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    main()
