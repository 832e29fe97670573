"""`ToolCallLoop`: consume tool calls, execute them, publish results, commit safely.

Per record: decode (malformed -> dead-letter topic, carry on), execute under the
`KeyedScheduler` (sessions in parallel, each session in order), publish the result keyed
by session id and acked by all replicas, and only then let the `OffsetTracker` count it
done. A runner that dies before committing gets its calls redelivered; the executor's
records and the sandbox's adoption make that a replay, not a second run. Nothing one
record does stops the loop: the executor turns every failure into that call's result,
and `Publisher` retries the broker's weather and replaces what Kafka refuses. The
consumer, publisher and executor are handed in (`app.py` builds them).
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError

from wakeline.runtime import tracing
from wakeline.contract.codec import MalformedRecord, decode, dead_letter_for
from wakeline.contract.commands import ToolCallRequest
from wakeline.transport.offsets import OffsetTracker
from wakeline.contract.topics import TOOL_CALLS
from wakeline_runner.executor import Executor
from wakeline_runner.keyed import KeyedScheduler
from wakeline_runner.publish import Publisher
from wakeline_runner.settings import RunnerSettings

log = logging.getLogger(__name__)
# The scheduler key dead letters share: not a session id (those start with a letter or digit),
# so a letter never waits behind a session's calls.
DEAD_LETTERS = "\x00dead-letters"
# Fetching stops at this many times `max_in_flight` records in flight, however many of them
# wait at their tenant's tool calls in flight quota (`_throttle`).
_AT_QUOTA_ROOM = 8


class ToolCallLoop:
    def __init__(self, settings: RunnerSettings, consumer: AIOKafkaConsumer, publisher: Publisher,
                 executor: Executor):
        self.settings, self.consumer, self.publisher, self.executor = settings, consumer, publisher, executor
        self.tracker = OffsetTracker()
        self.scheduler = KeyedScheduler(settings.max_concurrent_calls)
        # Stop fetching while this many records are in flight, so a backlog waits in Kafka, not here.
        self.max_in_flight = settings.max_concurrent_calls * 32
        self._committing: asyncio.Task | None = None
        self._committed_at = float("-inf")  # the loop's clock when the last commit began

    async def run(self, stop: asyncio.Event) -> None:
        self.consumer.subscribe([TOOL_CALLS], listener=_CommitOnRevoke(self))
        log.info("runner host=%s consuming %s in group %s", self.settings.host, TOOL_CALLS, self.settings.group_id)
        try:
            while not stop.is_set():
                self._throttle()
                for records in (await self._fetch()).values():
                    for record in records:
                        self._accept(record)
                self._commit_beside()
        finally:
            await self._shut_down()

    async def _fetch(self) -> dict:
        try:
            return await self.consumer.getmany(timeout_ms=200, max_records=100)
        except KafkaError as err:
            # Weather, or a batch the client cannot read: loud, and never an exit for every session.
            log.warning("fetching tool calls failed (%r); trying again in 1 s", err)
            await asyncio.sleep(1)
            return {}

    def _accept(self, record) -> None:
        partition = (record.topic, record.partition)
        self.tracker.add(partition, record.offset)
        try:
            request = decode(record.value, ToolCallRequest.model_validate_json)
        except Exception as bad:  # noqa: BLE001 - malformed, or a decoder bug: this record's problem only
            reason = bad.reason if isinstance(bad, MalformedRecord) else f"cannot be decoded: {bad!r}"
            work, key, tenant, cap = partial(self._dead_letter, record, reason), DEAD_LETTERS, DEAD_LETTERS, None
        else:
            tracing.remember(request.tool_call_id, record.headers)  # continued where the call runs
            work, key, tenant = partial(self._execute_and_publish, self._aged_here(request)), request.session_id, \
                request.tenant
            cap = request.tenant_calls_in_flight  # the tenant's quota, held per runner
        # A task either way: a dead letter waits for the broker as a result does, and is
        # committed past only once sent (or given up on), without holding up the loop.
        task = self.scheduler.submit(key, work, tenant, cap)
        task.add_done_callback(partial(self._finished, partition, record.offset))

    def _aged_here(self, request: ToolCallRequest) -> ToolCallRequest:
        """A call is judged stale as it arrives, not as it starts: one that came in fresh never
        expires while it waits here (behind its session's earlier call, for a slot, or at its
        tenant's tool calls in flight quota). The record keeps its issue time: a runner that
        gets it again after a crash judges it again."""
        if request.issued_at is None or self.executor.stale(request):
            return request
        return request.model_copy(update={"issued_at": None})

    async def _dead_letter(self, record, reason: str) -> None:
        key = record.key[:1000] if record.key is not None else None  # a letter must fit where the record did
        letter = dead_letter_for(record.topic, record.partition, record.offset, key, record.value, reason,
                                 service="runner")
        log.warning("dead-lettering %s[%d]@%d: %s", record.topic, record.partition, record.offset, reason)
        await self.publisher.dead_letter(letter, f"{record.topic}[{record.partition}]@{record.offset}")

    async def _execute_and_publish(self, request: ToolCallRequest) -> None:
        report = await self.executor.execute(request)
        # Acked by all replicas before the offset may move: a commit never outruns a result.
        await self.publisher.publish_result(report)

    def _finished(self, partition, offset: int, task: asyncio.Task) -> None:
        if task.cancelled():
            return  # shutting down: uncommitted, so it is redelivered and adopted or replayed
        if task.exception() is not None:
            # Not expected (execute and publish turn failures into results); if it happens,
            # the call is logged and passed, not retried forever: the brain re-issues it on wake.
            log.error("tool call at %s@%d failed without a result; moving past it", partition, offset,
                      exc_info=task.exception())
        self.tracker.finish(partition, offset)

    async def commit(self, partitions=None) -> None:
        moves = self.tracker.to_commit(partitions)
        if moves:
            await self.consumer.commit({TopicPartition(*p): offset for p, offset in moves.items()})
            self.tracker.mark_committed(moves)

    def _commit_beside(self) -> None:
        """Commits beside the fetch loop, one commit at a time: awaited in the loop, each
        commit's round trip held back the calls that arrived meanwhile."""
        if self._committing is not None and not self._committing.done():
            return
        now = asyncio.get_running_loop().time()
        if now - self._committed_at < self.settings.commit_every_s:
            return
        self._committed_at = now
        self._committing = asyncio.create_task(self._commit_unless_rebalancing())

    async def settle_commit(self) -> None:
        """Waits out a commit still in flight, so the next one sees what it recorded."""
        if self._committing is not None:
            await asyncio.gather(self._committing, return_exceptions=True)

    async def _commit_unless_rebalancing(self) -> None:
        try:
            await self.commit()
        except CommitFailedError as err:
            # The group moved on; the new owners get these records again and replay them.
            log.warning("commit refused during a rebalance: %s", err)
        except KafkaError as err:
            # The broker's weather (restart, coordinator move): the same offsets are tried next round.
            log.warning("commit failed (%r); retrying on the next round", err)

    def _throttle(self) -> None:
        # Calls waiting at their tenant's quota do not count, up to a hard bound: a tenant
        # over its quota must not stop this runner fetching the other tenants' calls.
        in_flight = self.tracker.in_flight()
        at_quota = sum(self.scheduler.over_cap().values()) if in_flight >= self.max_in_flight else 0
        if in_flight - at_quota >= self.max_in_flight or in_flight >= self.max_in_flight * _AT_QUOTA_ROOM:
            self.consumer.pause(*self.consumer.assignment())
        elif self.consumer.paused():
            self.consumer.resume(*self.consumer.paused())

    async def _shut_down(self) -> None:
        # Quick calls may finish; the rest are cancelled here while their detached tools
        # run on, to be adopted by whichever runner gets the uncommitted records next.
        if self.scheduler.tasks:
            await asyncio.wait(self.scheduler.tasks, timeout=self.settings.shutdown_drain_s)
        await self.scheduler.cancel_all()
        await self.settle_commit()
        try:
            await self.commit()
        except KafkaError as err:
            log.warning("final commit failed (%s); the records will be redelivered and replayed", err)


class _CommitOnRevoke(ConsumerRebalanceListener):
    """On revoke: commit what is safe, then forget those partitions.

    Calls still running for them finish and publish; if the new owner runs them too,
    it replays or adopts, and the brain drops duplicate results by tool_call_id.
    """

    def __init__(self, loop: ToolCallLoop):
        self.loop = loop

    async def on_partitions_revoked(self, revoked) -> None:
        keys = [(tp.topic, tp.partition) for tp in revoked]
        await self.loop.settle_commit()
        try:
            await self.loop.commit(keys)
        except KafkaError as err:
            log.warning("commit on revoke failed (%s); those records will be redelivered", err)
        self.loop.tracker.drop(keys)

    async def on_partitions_assigned(self, assigned) -> None:
        log.info("runner host=%s assigned %s", self.loop.settings.host, sorted(tp.partition for tp in assigned))
