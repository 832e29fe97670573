"""CPU seconds of every process on a step's path, from `/proc`: the Python services (each
with its descendants: a runner's sandboxes), the broker's JVM, the Postgres cluster split
by role, this bench process itself, and the whole machine (`/proc/stat`, every core).

The broker and the postmaster are found by the TCP port they listen on (the settings' own
bootstrap and DSN), so the figure is the one broker and cluster the services talk to,
whichever checkout started them. Not here: what the figures mean per step (`bench.cost`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


TICK_S = 1 / os.sysconf("SC_CLK_TCK")
# A postmaster child's process title starts with its role, or with `user database host`.
BACKGROUND = ("checkpointer", "background writer", "walwriter", "autovacuum launcher", "autovacuum worker",
              "logical replication launcher", "archiver", "walsender", "walreceiver", "startup",
              "parallel worker", "logical replication worker")


def _stat_fields(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_s(pid: int) -> float:
    """User + system CPU of a process and its waited-for children, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) * TICK_S


def tree_cpu_s(pid: int) -> float:
    """`cpu_s` of a process and of its live descendants: a runner's fork server, whose
    waited-for children are the calls' supervisors (and theirs the tools)."""
    total = cpu_s(pid)
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:  # a thread that ended meanwhile
            continue
        for child in children:
            try:
                total += tree_cpu_s(int(child))
            except OSError:  # ended meanwhile; its time is now in cpu_s(pid), read before
                continue
    return total


def machine_busy_s() -> float:
    """CPU seconds every core spent busy (not idle, not waiting on I/O) since boot."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) * TICK_S


def own_s(pid: int) -> float:
    """User + system CPU of the process itself (all its threads), not of its children."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) * TICK_S


def reaped_s(pid: int) -> float:
    """CPU of the process's children that ended and were waited for (cutime + cstime)."""
    fields = _stat_fields(pid)
    return (int(fields[13]) + int(fields[14])) * TICK_S


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:  # a thread that ended meanwhile
            continue
    return found


def title(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()


def listening_pid(port: int, name_has: str) -> int | None:
    """The process holding a LISTEN socket on `port`, among those whose command line has `name_has`."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{cols[9]}]")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if name_has not in title(int(proc.name)):
                continue
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                return int(proc.name)
        except OSError:  # ended meanwhile, or not ours to read
            continue
    return None


def postgres_role(process_title: str, database: str) -> str:
    """`postgres_backends` (a client of `database`), `postgres_other_db` (of another) or
    `postgres_background` (walwriter, checkpointer, autovacuum ...), from the process title."""
    words = process_title.removeprefix("postgres: ")
    if any(words.startswith(role) for role in BACKGROUND):
        return "postgres_background"
    parts = words.split()
    return "postgres_backends" if len(parts) > 1 and parts[1] == database else "postgres_other_db"


@dataclass
class Reading:
    """CPU seconds since boot (or process start) of each part, at one instant."""

    parts: dict[str, float]
    machine_s: float
    postgres_pids: dict[int, tuple[str, float]] = field(default_factory=dict)  # pid -> (role, own_s)
    postmaster_reaped_s: float = 0.0


@dataclass
class Census:
    """Which processes to read: the services by name, the broker's JVM, the postmaster."""

    services: dict[str, int]
    broker: int | None
    postmaster: int | None
    database: str
    bench: int = field(default_factory=os.getpid)
    # Backends serving this bench's own connections (its polls): `postgres_bench`, off the path.
    bench_backends: frozenset[int] = frozenset()

    def read(self) -> Reading:
        parts = {}
        for name, pid in self.services.items():
            try:
                parts[name] = tree_cpu_s(pid)
            except OSError:  # stopped: its figure is gone, and says so by its absence
                continue
        parts["bench"] = own_s(self.bench)  # not its children: a service it reaped would land here
        if self.broker is not None:
            parts["broker"] = own_s(self.broker)
        reading = Reading(parts, machine_busy_s())
        if self.postmaster is not None:
            reading.parts["postgres_postmaster"] = own_s(self.postmaster)
            reading.postmaster_reaped_s = reaped_s(self.postmaster)
            for pid in children(self.postmaster):
                try:
                    role = "postgres_bench" if pid in self.bench_backends else postgres_role(title(pid), self.database)
                    reading.postgres_pids[pid] = (role, own_s(pid))
                except OSError:  # ended between the listing and the read: counted as reaped
                    continue
        return reading


def used_s(before: Reading, after: Reading) -> dict[str, float]:
    """CPU seconds each part used between two readings. A Postgres backend that ended in
    between is waited for by the postmaster, so its time shows in the postmaster's reaped
    time: what it used inside the window is that growth less what it had used before."""
    used = {name: after.parts[name] - before.parts[name] for name in after.parts if name in before.parts}
    if before.postgres_pids or after.postgres_pids:
        for pid, (role, seconds) in after.postgres_pids.items():
            used[role] = used.get(role, 0.0) + seconds - before.postgres_pids.get(pid, (role, 0.0))[1]
        ended_before = sum(s for pid, (_, s) in before.postgres_pids.items() if pid not in after.postgres_pids)
        used["postgres_ended"] = after.postmaster_reaped_s - before.postmaster_reaped_s - ended_before
    used["machine"] = after.machine_s - before.machine_s
    return used
