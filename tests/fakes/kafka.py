"""In-memory stand-ins for aiokafka's producer and consumer, for the loops above them.

`FakeProducer` records what is sent: inside a transaction (with the consumer offsets sent
to it, committed or aborted) or acknowledged on its own (`send_and_wait`). `FakeConsumer`
hands out the records a test feeds it and records the offsets committed. Both can write
to one shared `journal`, so a test can assert what happened before what (a result acked
before its offset was committed). They model the client's surface the services use, not
the broker: no partitioning, no fencing, no rebalances unless a test scripts a failure.
Real-Kafka behaviour stays covered by tests/integration and tests/e2e.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from aiokafka.structs import ConsumerRecord, TopicPartition


@dataclass(frozen=True)
class Sent:
    topic: str
    value: bytes
    key: bytes | None
    partition: int | None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass
class Transaction:
    sent: list[Sent] = field(default_factory=list)
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    group_id: str | None = None
    outcome: Literal["open", "committed", "aborted"] = "open"


class FakeProducer:
    def __init__(self, journal: list[tuple[str, Any]] | None = None):
        self.journal = journal if journal is not None else []
        self.started = self.stopped = False
        self.transactions: list[Transaction] = []
        self.acked: list[Sent] = []  # sent and acknowledged outside any transaction
        self.fail_start: Exception | None = None
        self.fail_commit: Exception | None = None  # raised once, by the next transaction's commit
        self._open: Transaction | None = None

    @property
    def committed(self) -> list[Transaction]:
        return [t for t in self.transactions if t.outcome == "committed"]

    async def start(self) -> None:
        if self.fail_start is not None:
            raise self.fail_start
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        txn = self._open = Transaction()
        self.transactions.append(txn)
        try:
            yield
            if self.fail_commit is not None:
                err, self.fail_commit = self.fail_commit, None
                raise err
        except BaseException:
            txn.outcome = "aborted"
            raise
        else:
            txn.outcome = "committed"
            self.journal.append(("commit_transaction", txn))
        finally:
            self._open = None

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   partition: int | None = None, headers: list | None = None) -> asyncio.Future:
        sent = Sent(topic, value or b"", key, partition, tuple(headers or ()))
        if self._open is not None:
            self._open.sent.append(sent)
        else:
            self.acked.append(sent)
            self.journal.append(("acked", sent))
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    async def send_and_wait(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                            partition: int | None = None, headers: list | None = None) -> None:
        return await (await self.send(topic, value, key, partition, headers))

    async def send_offsets_to_transaction(self, offsets: dict[TopicPartition, int], group_id: str) -> None:
        assert self._open is not None, "offsets sent outside a transaction"
        self._open.offsets.update(offsets)
        self._open.group_id = group_id


def consumer_record(topic: str, partition: int, offset: int, key: bytes | None,
                    value: bytes | None) -> ConsumerRecord:
    return ConsumerRecord(topic=topic, partition=partition, offset=offset, timestamp=0, timestamp_type=0,
                          key=key, value=value, checksum=None, serialized_key_size=len(key or b""),
                          serialized_value_size=len(value or b""), headers=())


class FakeConsumer:
    """A group member whose partitions are those of the records fed to it."""

    def __init__(self, journal: list[tuple[str, Any]] | None = None):
        self.journal = journal if journal is not None else []
        self.subscribed: list[str] = []
        self.listener: Any = None
        self.commits: list[dict[TopicPartition, int]] = []
        self._waiting: list[ConsumerRecord] = []
        self._assigned: set[TopicPartition] = set()
        self._paused: set[TopicPartition] = set()
        self._fed = asyncio.Event()

    def feed(self, *records: ConsumerRecord) -> None:
        self._waiting.extend(records)
        self._assigned |= {TopicPartition(r.topic, r.partition) for r in records}
        self._fed.set()

    def committed_offset(self, tp: TopicPartition) -> int | None:
        return next((c[tp] for c in reversed(self.commits) if tp in c), None)

    def subscribe(self, topics: list[str], listener: Any = None) -> None:
        self.subscribed, self.listener = list(topics), listener

    async def getmany(self, *partitions: TopicPartition, timeout_ms: int = 0,
                      max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        if not self._ready():
            self._fed.clear()
            try:
                await asyncio.wait_for(self._fed.wait(), timeout_ms / 1000)
            except TimeoutError:
                return {}
        taken = self._ready()[:max_records]
        gone = {id(r) for r in taken}
        self._waiting = [r for r in self._waiting if id(r) not in gone]
        batch: dict[TopicPartition, list[ConsumerRecord]] = {}
        for record in taken:
            batch.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
        return batch

    def _ready(self) -> list[ConsumerRecord]:
        return [r for r in self._waiting if TopicPartition(r.topic, r.partition) not in self._paused]

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commits.append(dict(offsets))
        self.journal.append(("commit_offsets", dict(offsets)))

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    def pause(self, *partitions: TopicPartition) -> None:
        self._paused |= set(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._paused -= set(partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)
