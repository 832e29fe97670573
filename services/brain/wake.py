"""Loading a session the brain does not hold: the archive, then the un-archived tail.

Postgres holds what the archiver has stored, and `archiver_offsets` says how far into
each events partition that is — both read in one snapshot, so the Kafka tail read from
that offset to the partition's end covers exactly the rest. Together they are every
committed event of the session; the fold of them is the state to continue from.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from wakeline.event_rows import READ_COLUMNS, event_from_row  # noqa: F401 (re-exported)
from wakeline.events import EventBase, parse_event
from wakeline.pg import TenantPool
from wakeline.settings import CommonSettings
from wakeline.topics import EVENTS

EVENT_COLUMNS = READ_COLUMNS


class SessionLoader:
    def __init__(self, settings: CommonSettings, pool: TenantPool, archiver_group: str):
        self._settings = settings
        self._pool = pool
        self._archiver_group = archiver_group
        self._tail = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, group_id=None,
                                      enable_auto_commit=False, isolation_level="read_committed",
                                      fetch_max_wait_ms=100)
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        await self._tail.start()

    async def stop(self) -> None:
        await self._tail.stop()

    async def load(self, session_id: str, tenant: str, partition: int) -> list[EventBase]:
        archived, offset = await self._archived(session_id, tenant, partition)
        last = archived[-1].seq if archived else 0
        tail = await self._read_tail(session_id, partition, offset)
        return archived + [e for e in tail if e.seq > last]

    async def _archived(self, session_id: str, tenant: str, partition: int) -> tuple[list[EventBase], int]:
        # Offset first, rows second: the rows then hold at least everything before the
        # offset, and the tail read from it overlaps rather than leaves a gap.
        async with self._pool.transaction(tenant) as conn:
            offset = await conn.fetchval(
                "SELECT next_offset FROM archiver_offsets WHERE consumer_group = $1 AND topic = $2"
                " AND partition = $3", self._archiver_group, EVENTS, partition)
            rows = await conn.fetch(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = $1 ORDER BY seq", session_id)
        return [event_from_row(r) for r in rows], offset or 0

    async def _read_tail(self, session_id: str, partition: int, start: int) -> list[EventBase]:
        tp = TopicPartition(EVENTS, partition)
        key = session_id.encode()
        found: list[EventBase] = []
        async with self._lock:  # one shared consumer, one reader at a time
            self._tail.assign([tp])
            # Paused until we read: otherwise the background fetcher starts a long poll
            # of its own and the offset look-up below waits behind it.
            self._tail.pause(tp)
            # `wakeline.events` is written only in transactions, so the offset right
            # before the read-committed end is always a commit (or abort) marker. The
            # client never hands a marker back nor moves its position past one, so the
            # tail is read once the position reaches it.
            last = (await self._tail.end_offsets([tp]))[tp] - 1
            if start >= last:
                return found
            self._tail.seek(tp, start)
            self._tail.resume(tp)
            while await self._tail.position(tp) < last:
                records = (await self._tail.getmany(tp, timeout_ms=1000, max_records=5000)).get(tp, [])
                if not records:
                    break  # nothing came within a second: only markers remain
                found.extend(parse_event(r.value) for r in records if r.key == key)
            self._tail.pause(tp)
        return found
