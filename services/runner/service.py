"""The runner service: consume tool calls, execute them, publish results, commit safely.

Per record: decode (malformed -> dead-letter topic, carry on), execute under the
`KeyedScheduler` (sessions in parallel, each session in order), publish the result keyed
by session id and acked by all replicas, and only then let the `OffsetTracker` count it
done. A runner that dies before committing gets its calls redelivered; the executor's
records and the sandbox's adoption make that a replay, not a second run.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError

from wakeline.codec import MalformedRecord, decode, dead_letter_for
from wakeline.commands import ToolCallRequest
from wakeline.kafka_io import make_consumer, make_producer, send_keyed
from wakeline.topics import DEAD_LETTER, TOOL_CALLS, TOOL_RESULTS
from wakeline_runner.executor import Executor
from wakeline_runner.isolation import probe
from wakeline_runner.keyed import KeyedScheduler
from wakeline.offsets import OffsetTracker
from wakeline_runner.sandbox import Sandbox
from wakeline_runner.settings import RunnerSettings

log = logging.getLogger(__name__)


async def run(settings: RunnerSettings, stop: asyncio.Event) -> None:
    executor = Executor(settings, Sandbox(settings, await asyncio.to_thread(probe, settings)))
    consumer = make_consumer(settings, group_id=settings.group_id)
    producer = make_producer(settings)
    await producer.start()
    try:
        await consumer.start()
        try:
            await ToolCallLoop(settings, consumer, producer, executor).run(stop)
        finally:
            await consumer.stop()
    finally:
        await producer.stop()


class ToolCallLoop:
    def __init__(self, settings: RunnerSettings, consumer: AIOKafkaConsumer, producer: AIOKafkaProducer,
                 executor: Executor):
        self.settings, self.consumer, self.producer, self.executor = settings, consumer, producer, executor
        self.tracker = OffsetTracker()
        self.scheduler = KeyedScheduler(settings.max_concurrent_calls)
        self.failure: BaseException | None = None
        # Stop fetching while this many records are in flight, so a backlog waits in Kafka, not here.
        self.max_in_flight = settings.max_concurrent_calls * 32

    async def run(self, stop: asyncio.Event) -> None:
        self.consumer.subscribe([TOOL_CALLS], listener=_CommitOnRevoke(self))
        log.info("runner host=%s consuming %s in group %s", self.settings.host, TOOL_CALLS, self.settings.group_id)
        try:
            while not stop.is_set() and self.failure is None:
                self._throttle()
                batches = await self.consumer.getmany(timeout_ms=200, max_records=100)
                for records in batches.values():
                    for record in records:
                        await self._accept(record)
                await self._commit_unless_rebalancing()
            if self.failure is not None:
                raise RuntimeError("a tool result could not be recorded or published; stopping") from self.failure
        finally:
            await self._shut_down()

    async def _accept(self, record) -> None:
        partition = (record.topic, record.partition)
        self.tracker.add(partition, record.offset)
        try:
            request = decode(record.value, ToolCallRequest.model_validate_json)
        except MalformedRecord as bad:
            letter = dead_letter_for(record.topic, record.partition, record.offset, record.key, record.value,
                                     bad.reason, service="runner")
            await send_keyed(self.producer, DEAD_LETTER, letter.key or "", letter, self.settings.partitions)
            log.warning("dead-lettered %s[%d]@%d: %s", record.topic, record.partition, record.offset, bad.reason)
            self.tracker.finish(partition, record.offset)
            return
        task = self.scheduler.submit(request.session_id, partial(self._execute_and_publish, request))
        task.add_done_callback(partial(self._finished, partition, record.offset))

    async def _execute_and_publish(self, request: ToolCallRequest) -> None:
        report = await self.executor.execute(request)
        # Acked by all replicas before the offset may move: a commit never outruns a result.
        await send_keyed(self.producer, TOOL_RESULTS, request.session_id, report, self.settings.partitions)

    def _finished(self, partition, offset: int, task: asyncio.Task) -> None:
        if task.cancelled():
            return  # shutting down: uncommitted, so it is redelivered and adopted or replayed
        if task.exception() is not None:
            log.error("tool call at %s@%d: no durable result", partition, offset, exc_info=task.exception())
            self.failure = task.exception()
            return
        self.tracker.finish(partition, offset)

    async def commit(self, partitions=None) -> None:
        moves = self.tracker.to_commit(partitions)
        if moves:
            await self.consumer.commit({TopicPartition(*p): offset for p, offset in moves.items()})
            self.tracker.mark_committed(moves)

    async def _commit_unless_rebalancing(self) -> None:
        try:
            await self.commit()
        except CommitFailedError as err:
            # The group moved on; the new owners get these records again and replay them.
            log.warning("commit refused during a rebalance: %s", err)

    def _throttle(self) -> None:
        if self.tracker.in_flight() >= self.max_in_flight:
            self.consumer.pause(*self.consumer.assignment())
        elif self.consumer.paused():
            self.consumer.resume(*self.consumer.paused())

    async def _shut_down(self) -> None:
        # Quick calls may finish; the rest are cancelled here while their detached tools
        # run on, to be adopted by whichever runner gets the uncommitted records next.
        if self.scheduler.tasks:
            await asyncio.wait(self.scheduler.tasks, timeout=self.settings.shutdown_drain_s)
        await self.scheduler.cancel_all()
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
        try:
            await self.loop.commit(keys)
        except KafkaError as err:
            log.warning("commit on revoke failed (%s); those records will be redelivered", err)
        self.loop.tracker.drop(keys)

    async def on_partitions_assigned(self, assigned) -> None:
        log.info("runner host=%s assigned %s", self.loop.settings.host, sorted(tp.partition for tp in assigned))
