"""A throwaway Kafka broker for the tests that restart or pause one, and what an open transaction holds.

A test that restarts the shared broker changes it under every test after it: a transaction
left open by a restart pins a partition's last stable offset, and every read-committed
consumer of that partition waits, in whatever test runs next. So the tests that restart a
broker start their own (`deploy/kafka/kafka.sh` on free ports and a data directory of their
own, the topics created as `make up` creates them) and restart that one. A test that pauses a
broker (`PrivateBroker.paused`) pauses its own for the same reason.

`held_partitions` names the partitions whose read-committed end lags the high watermark:
what a consumer that "sees nothing" is waiting behind. Tests put it in their failure
messages, so a stall says where it is.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from tests.requirements import missing
from wakeline.transport.kafka_io import kafka_auth
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import ALL_TOPICS

ROOT = Path(__file__).resolve().parents[1]
KAFKA_SH = ROOT / "deploy" / "kafka" / "kafka.sh"


def _free_ports(count: int) -> list[int]:
    """`count` distinct ports free now: held open together, so no two come back the same."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass(frozen=True)
class PrivateBroker:
    bootstrap: str
    env: dict[str, str]  # what kafka.sh needs to find this broker and no other

    def command(self, what: str) -> str:
        """`kafka.sh up|down|restart` on this broker, returning what it said; a failure names
        the script's own words."""
        done = subprocess.run(["bash", str(KAFKA_SH), what], env=self.env, capture_output=True, text=True,
                              timeout=240)
        assert done.returncode == 0, f"kafka.sh {what} failed:\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr

    def jvm_pid(self) -> int:
        """The broker's JVM, from kafka.sh's pid file, checked against its command line as
        kafka.sh checks it: a recycled pid must never be signalled."""
        props = Path(self.env["WAKELINE_KAFKA_DATA"]).resolve() / "server.properties"
        pid = int((props.parent / "kafka.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        assert cmdline.endswith(f"kafka.Kafka {props}"), f"pid {pid} is not this broker: {cmdline[-200:]}"
        return pid

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The broker stopped (SIGSTOP) for the block: its sockets stay open and the kernel
        still accepts connections and takes requests, but nothing is answered. Always resumed."""
        pid = self.jvm_pid()
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)


@contextmanager
def private_broker(data_dir: Path, credentials: Path | None = None) -> Iterator[PrivateBroker]:
    """`credentials`: a credentials file of its own (generated if missing), else the stack's."""
    port, controller_port = _free_ports(2)
    env = {**os.environ, "WAKELINE_KAFKA_PORT": str(port), "WAKELINE_KAFKA_CONTROLLER_PORT": str(controller_port),
           "WAKELINE_KAFKA_DATA": str(data_dir), "WAKELINE_KAFKA_BOOTSTRAP": f"127.0.0.1:{port}"}
    if credentials is not None:
        env["WAKELINE_CREDENTIALS_FILE"] = str(credentials)
    broker = PrivateBroker(f"127.0.0.1:{port}", env)
    try:
        started = subprocess.run(["bash", str(KAFKA_SH), "up"], env=env, capture_output=True, text=True,
                                 timeout=240)
        if started.returncode != 0:
            missing(f"a private Kafka broker did not start: {started.stdout}{started.stderr}")
        for what in ("topics", "acls"):
            done = subprocess.run([sys.executable, "-m", "wakeline.ops.admin", what], env=env, capture_output=True,
                                  text=True, timeout=120, cwd=ROOT)
            assert done.returncode == 0, f"{what} on the private broker: {done.stdout}{done.stderr}"
        yield broker
    finally:
        subprocess.run(["bash", str(KAFKA_SH), "down"], env=env, capture_output=True, timeout=120)
        if not os.environ.get("WAKELINE_KEEP_BROKER_DATA"):  # kept: its logs and segments, to read after a failure
            shutil.rmtree(data_dir, ignore_errors=True)


@contextmanager
def private_broker_in_environ(data_dir: Path) -> Iterator[PrivateBroker]:
    """A private broker that settings built inside the block connect to (WAKELINE_KAFKA_BOOTSTRAP)."""
    with private_broker(data_dir) as broker, environ(WAKELINE_KAFKA_BOOTSTRAP=broker.bootstrap):
        yield broker


@contextmanager
def environ(**values: str) -> Iterator[None]:
    """`os.environ` with `values` set for the block (settings classes read it when built)."""
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


async def held_partitions(bootstrap: str, partitions: int) -> str:
    """Partitions whose read-committed end is short of the high watermark (an open transaction
    holds them), as one line; what was found instead if the broker cannot be asked."""
    tps = [TopicPartition(topic, p) for topic in ALL_TOPICS for p in range(partitions)]
    ends: dict[str, dict[TopicPartition, int]] = {}
    try:
        for isolation in ("read_committed", "read_uncommitted"):
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, **kafka_auth(CommonSettings()),
                                        isolation_level=isolation,
                                        request_timeout_ms=5_000)
            await asyncio.wait_for(consumer.start(), 10)
            try:
                ends[isolation] = await asyncio.wait_for(consumer.end_offsets(tps), 10)
            finally:
                await consumer.stop()
    except Exception as err:  # noqa: BLE001 - a diagnosis must not replace the failure it explains
        return f"(could not read the partitions' ends: {err!r})"
    held = [f"{tp.topic}[{tp.partition}] stable to {ends['read_committed'][tp]} of {ends['read_uncommitted'][tp]}"
            for tp in tps if ends["read_committed"][tp] < ends["read_uncommitted"][tp]]
    return "held by an open transaction: " + ", ".join(held) if held else "no partition is held by a transaction"


async def first_value_at(settings: CommonSettings, tp: TopicPartition, offset: int) -> bytes | None:
    """The value of the first committed record at or after `offset` of `tp`, read as `settings`' principal."""
    reader = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings),
                              isolation_level="read_committed", enable_auto_commit=False)
    await reader.start()
    try:
        reader.assign([tp])
        reader.seek(tp, offset)
        batch = await reader.getmany(tp, timeout_ms=10_000)
    finally:
        await reader.stop()
    records = batch.get(tp, [])
    return records[0].value if records else None


async def leave_stray_transaction(topic: str, partition: int, transactional_id: str) -> None:
    """A transaction of `transactional_id`'s producer id left open on `topic[partition]` that
    its coordinator never heard of, so no fence of that id ever ends it: what a writer's
    sender dying mid-transaction as the broker stopped left behind in test_weather.

    The broker's transaction verification (KIP-890) refuses such a record, so it is turned off
    on this broker first (a private broker only). The producer then skips AddPartitionsToTxn
    for the partition and stops without ending its transaction.
    """
    settings = CommonSettings()  # the admin principal: alters configs, writes as any transactional id
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings))
    await admin.start()
    try:
        await admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1",
                                                  {"transaction.partition.verification.enable": "false"})])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), acks="all",
                                enable_idempotence=True, transactional_id=transactional_id)
    await producer.start()
    try:
        producer._txn_manager.maybe_add_partition_to_txn = lambda tp: None  # the coordinator never hears of it
        await producer.begin_transaction()
        delivered = await producer.send(topic, b"stray", key=b"stray", partition=partition)
        await delivered
    finally:
        await producer.stop()  # aiokafka's stop ends no transaction
