"""A throwaway three-node Kafka cluster (`deploy/kafka/cluster.sh` on free ports and a data
directory of its own), with the topics created as `make cluster-up` creates them:
replication factor 3, min.insync.replicas 2.

Like `tests.private_broker`, it exists so the tests that kill brokers never touch the
shared one. Node N is KRaft node id N; `port(N)` is its client port.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.private_broker import environ
from tests.requirements import missing

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_SH = ROOT / "deploy" / "kafka" / "cluster.sh"
NODES = (1, 2, 3)


def _offsets(base: int) -> list[int]:
    """The six ports cluster.sh uses from `base`: node N's client port and its controller's."""
    return [base + 10 * (n - 1) + k for n in NODES for k in (0, 1)]


def _free_base() -> int:
    for _ in range(200):
        base = random.randrange(20_000, 32_000)  # below the ephemeral range: a killed node must get its port back
        sockets = []
        try:
            for port in _offsets(base):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no six free ports for a private cluster")


@dataclass(frozen=True)
class PrivateCluster:
    base: int
    env: dict[str, str]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port(n)}" for n in NODES)

    def port(self, node: int) -> int:
        return self.base + 10 * (node - 1)

    def command(self, *args: str) -> str:
        """`cluster.sh …` on this cluster, returning what it said; a failure names its words."""
        done = subprocess.run(["bash", str(CLUSTER_SH), *args], env=self.env, capture_output=True, text=True,
                              timeout=240)
        assert done.returncode == 0, f"cluster.sh {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr


@contextmanager
def private_cluster(data_dir: Path) -> Iterator[PrivateCluster]:
    base = _free_base()
    bootstrap = ",".join(f"127.0.0.1:{base + 10 * (n - 1)}" for n in NODES)
    env = {**os.environ, "WAKELINE_CLUSTER_BASE_PORT": str(base),
           "WAKELINE_CLUSTER_DATA": str(data_dir), "WAKELINE_KAFKA_BOOTSTRAP": bootstrap,
           "WAKELINE_REPLICATION_FACTOR": "3", "WAKELINE_MIN_INSYNC_REPLICAS": "2"}
    cluster = PrivateCluster(base, env)
    try:
        started = subprocess.run(["bash", str(CLUSTER_SH), "up"], env=env, capture_output=True, text=True,
                                 timeout=300)
        if started.returncode != 0:
            missing(f"a private three-node Kafka cluster did not start: {started.stdout}{started.stderr}")
        for what in ("topics", "acls"):
            done = subprocess.run([sys.executable, "-m", "wakeline.ops.admin", what], env=env, capture_output=True,
                                  text=True, timeout=120, cwd=ROOT)
            assert done.returncode == 0, f"{what} on the private cluster: {done.stdout}{done.stderr}"
        yield cluster
    finally:
        subprocess.run(["bash", str(CLUSTER_SH), "down"], env=env, capture_output=True, timeout=240)
        shutil.rmtree(data_dir, ignore_errors=True)


@contextmanager
def private_cluster_in_environ(data_dir: Path) -> Iterator[PrivateCluster]:
    """A private cluster that settings built inside the block connect to."""
    with private_cluster(data_dir) as cluster, environ(WAKELINE_KAFKA_BOOTSTRAP=cluster.bootstrap,
                                                       WAKELINE_REPLICATION_FACTOR="3",
                                                       WAKELINE_MIN_INSYNC_REPLICAS="2"):
        yield cluster
