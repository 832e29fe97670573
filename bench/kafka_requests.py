"""The broker's requests by API key (Produce, AddPartitionsToTxn, EndTxn, Fetch, ...): the
counts of its `kafka.network:type=RequestMetrics,name=RequestsPerSec` meters, read over JMX.

`bench/jmx/KafkaRequests.java` attaches to the broker's JVM by pid (the Attach API: same
user, no JMX port, no restart) and answers each line on its stdin with the counts as one
JSON line. One helper serves a whole bench run; it is started before a window opens, so
its own start (a JVM compiling a source file) is never in a measured window. Where it
cannot run (no JDK, the broker another user's, attach disabled) `unavailable` says why.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "jmx" / "KafkaRequests.java"
# Per-kind meters beside the one for all Fetch requests: counted there already.
SUBSETS = ("FetchConsumer", "FetchFollower")


class KafkaRequests:
    def __init__(self, broker_pid: int | None):
        self.unavailable: str | None = None
        self._proc: subprocess.Popen | None = None
        java = shutil.which("java")
        if broker_pid is None:
            self.unavailable = "no broker process found on the bootstrap port"
        elif java is None:
            self.unavailable = "no java on PATH"
        else:
            self._proc = subprocess.Popen([java, str(SOURCE), str(broker_pid)], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self._line()  # the counts it prints once attached: proof that it can read them

    def _line(self) -> dict[str, int] | None:
        assert self._proc is not None and self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            error = (self._proc.stderr.read() if self._proc.stderr else "").strip().splitlines()
            self.unavailable = f"jmx: {error[-1] if error else 'the helper exited'}"
            self._proc = None
            return None
        return json.loads(line)

    def counts(self) -> dict[str, int] | None:
        """Requests of each API key since the broker started, or None (see `unavailable`)."""
        if self._proc is None:
            return None
        assert self._proc.stdin is not None
        self._proc.stdin.write("\n")
        self._proc.stdin.flush()
        return self._line()

    def close(self) -> None:
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait(timeout=10)
            self._proc = None


def per_step(before: dict[str, int], after: dict[str, int], steps: int) -> dict[str, float]:
    """Requests of each API key per step over a window, largest first; `total` leaves out
    the per-kind subsets of Fetch."""
    grown = {key: after[key] - before.get(key, 0) for key in after if after[key] > before.get(key, 0)}
    figures = {key: round(n / steps, 3) for key, n in sorted(grown.items(), key=lambda kv: -kv[1])}
    figures["total"] = round(sum(n for key, n in grown.items() if key not in SUBSETS) / steps, 3)
    return figures
