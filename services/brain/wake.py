"""Loading a session the brain does not hold: the archive, then the un-archived tail.

Postgres holds what the archiver has stored, and `wake_start`
(`wakeline.storage.archive_position`) says how far into each events partition that is. The
offset is read before the rows, so the rows hold at least everything before it and the
Kafka tail read from that offset to the partition's end covers the rest (overlapping,
never leaving a gap). Together they are every committed event of the session. Postgres
is read from the session's newest `snapshot` event (`wakeline.log.snapshots`), so a wake
reads and folds what came after it, not the whole log, however long the session is.

A session id names one session across tenants: the owner comes from the log
(`session_tenant`, migration 0009, or the tail), never from the input that woke it.
Failures are sorted here: transient ones (`is_transient`) (a restarting database or broker, a tail that
did not reach the end in time) are retried by the caller; anything else is a fact
about the session's log and parks it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from wakeline.storage.archive_position import ARCHIVER_GROUP, wake_start
from wakeline.storage.event_statements import events_from_snapshot, session_events
from wakeline.contract.events import Event, SessionForked, SnapshotTaken, parse_event
from wakeline.storage.lineage import prefix_events
from wakeline.transport.kafka_io import RANGE_FETCH_WAIT_MS, RANGE_POLL_MS, kafka_auth
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings
from wakeline.log.snapshots import current
from wakeline.contract.topics import EVENTS
from wakeline.runtime.weather import is_weather


class WakeIncomplete(RuntimeError):
    """The tail read did not reach the end offsets taken at its start within the deadline."""


class SessionParked(RuntimeError):
    """The archiver parked the session (0010): its archive stops at a gap, so a fold of
    archive + tail would miss events and the brain would seal seqs that already exist."""


def is_transient(exc: BaseException) -> bool:
    """Weather (a database shutting down, a broker away) or a tail not read to its end yet."""
    return isinstance(exc, WakeIncomplete) or is_weather(exc)


def tail_consumer(settings: CommonSettings, fetch_max_wait_ms: int = RANGE_FETCH_WAIT_MS) -> AIOKafkaConsumer:
    """The consumer a `SessionLoader` reads tails with; its owner starts and stops it."""
    # "none": an archive offset Kafka no longer has means events were lost before
    # they were archived; that must fail loudly, never silently start elsewhere.
    return AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), group_id=None,
                            enable_auto_commit=False, isolation_level="read_committed",
                            fetch_max_wait_ms=fetch_max_wait_ms, auto_offset_reset="none")


@dataclass
class _TailRequest:
    key: bytes
    start: int
    found: asyncio.Future[list[Event]] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class SessionLoader:
    """`tail` is a started `tail_consumer`; `archiver_group` names the archive to read.

    Tails are read one at a time on the shared consumer, and one read serves every wake
    of the same partition that queued behind it: when 500 sessions start at once, the
    partition's tail is read a few times, not 500 times one after another (issue 10)."""

    def __init__(self, pool: TenantPool, tail: AIOKafkaConsumer, archiver_group: str = ARCHIVER_GROUP,
                 tail_deadline_s: float = 30.0, topic: str = EVENTS):
        self._topic = topic  # tests read private topics
        self._pool = pool
        self._tail = tail
        self._archiver_group = archiver_group
        self._tail_deadline_s = tail_deadline_s
        self._lock = asyncio.Lock()
        self._queued: dict[int, list[_TailRequest]] = {}

    async def load(self, session_id: str, tenant: str, partition: int, whole: bool = False) -> list[Event]:
        """Every committed event of the session from its newest archived snapshot on (from
        its first without one, or with `whole`), under the tenant that owns it (which may not
        be `tenant`, the claim of the input that woke it). `wakeline.log.snapshots.resume` folds them."""
        owner, archived, offset = await self._archived(session_id, tenant, partition, whole)
        last = archived[-1].seq if archived else 0
        tail = [e for e in await self._read_tail(session_id, partition, offset) if e.seq > last]
        if owner is None and tail:
            owner = tail[0].tenant
        events = [e for e in archived + tail if e.tenant == (owner or tenant)]
        if events and isinstance(events[0], SessionForked):  # a fork folds from its parent's prefix
            forked = events[0].payload
            events = await self.prefix(forked.parent_session_id, owner or tenant, forked.fork_seq) + events
        return events

    async def prefix(self, parent_id: str, tenant: str, upto: int) -> list[Event]:
        """The parent's history 1..`upto` a fork inherits, from the archive (`wakeline.storage.lineage`);
        `PrefixUnavailable` when it is not all there, which parks the fork's wake."""
        async with self._pool.transaction(tenant) as conn:
            return await prefix_events(conn, parent_id, upto)

    async def _archived(self, session_id: str, tenant: str,
                        partition: int, whole: bool = False) -> tuple[str | None, list[Event], int]:
        # Offset first, rows second: the rows then hold at least everything before the
        # offset, and the tail read from it overlaps rather than leaves a gap.
        async with self._pool.system_transaction() as conn:
            start = await wake_start(conn, session_id, tenant, self._topic, partition, self._archiver_group)
            owner, offset, parked = start.owner, start.next_offset, start.parked
            if parked:
                raise SessionParked(f"the archiver parked it from seq {parked.from_seq}: {parked.reason}")
            if owner is None:
                # No key in event_keys under any tenant, so no row in events either (each row's
                # key is inserted by the same statement, and keys outlive retention): a new
                # session's wake skips the two reads, 3 round trips instead of 5.
                return owner, [], offset
            archived = await (session_events if whole else events_from_snapshot)(conn, session_id)
            if archived and isinstance(archived[0], SnapshotTaken) and not current(archived[0]):
                archived = await session_events(conn, session_id)  # written by other code: all of it
        return owner, archived, offset

    async def _read_tail(self, session_id: str, partition: int, start: int) -> list[Event]:
        """The session's committed events in events p from `start` on (and perhaps some
        before it, which `load` drops by seq), read to the end as it was once we asked."""
        request = _TailRequest(session_id.encode(), start)
        self._queued.setdefault(partition, []).append(request)
        async with self._lock:  # one shared consumer, one reader at a time
            if not request.found.done():  # else a read that began after we queued served us
                batch = self._queued.pop(partition)
                others = [r for r in batch if r is not request]
                try:
                    found = await self._read_keys(partition, min(r.start for r in batch), {r.key for r in batch})
                except asyncio.CancelledError:  # our actor stopped: the next reader serves the rest
                    self._queued.setdefault(partition, []).extend(others)
                    raise
                except Exception as exc:  # theirs too: each caller decides whether to retry
                    for r in others:
                        r.found.set_exception(exc)
                    raise
                for r in batch:
                    if not r.found.done():
                        r.found.set_result(found.get(r.key, []))
        return request.found.result()

    async def _read_keys(self, partition: int, start: int, keys: set[bytes]) -> dict[bytes, list[Event]]:
        """The events of `keys` in events p from `start` to the read-committed end as it is now."""
        tp = TopicPartition(self._topic, partition)
        found: dict[bytes, list[Event]] = {}
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
        # Read in this task and pause before yielding to the loop again. Under `wait_for`
        # (a task of its own) the loop ran once between the last records and the pause,
        # and in that turn the fetcher sent its next fetch from the end: a long poll of up
        # to `fetch_max_wait_ms` that the broker answers before any later request on the
        # connection, so the next wake's `end_offsets` waited behind it (issue 10: 20–65 ms
        # on every second wake in `bench.wake_time`).
        try:
            async with asyncio.timeout(self._tail_deadline_s):
                await self._read_until(tp, last, keys, found)
        except TimeoutError:
            raise WakeIncomplete(f"{self._topic}[{partition}]: the tail read did not reach offset {last}"
                                 f" within {self._tail_deadline_s:g} s") from None
        finally:
            self._tail.pause(tp)
        return found

    async def _read_until(self, tp: TopicPartition, last: int, keys: set[bytes],
                          found: dict[bytes, list[Event]]) -> None:
        # An empty poll is not the end: after a fence or during a slow fetch the next
        # records may still be on their way. Only the position says we are done.
        while await self._tail.position(tp) < last:
            records = (await self._tail.getmany(tp, timeout_ms=RANGE_POLL_MS, max_records=5000)).get(tp, [])
            for r in records:
                if r.key in keys:
                    found.setdefault(r.key, []).append(parse_event(r.value))
