"""`run(settings, stop)`: the runner process, wired in one place.

Probes the isolation (refusing to start without it), detects the control groups it may
use and logs which limits are in force, builds the executor over its sandbox, the
tool-call consumer and the result publisher, and runs the `ToolCallLoop` (`loop.py`)
until SIGTERM. The publisher outlives the consumer: results still being sent when the
consumer stops are not cut off.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from aiokafka import AIOKafkaProducer

from wakeline.transport.kafka_io import make_consumer, make_producer
from wakeline_runner import cgroups
from wakeline_runner.executor import Executor
from wakeline_runner.isolation import probe, rlimits
from wakeline_runner.loop import ToolCallLoop
from wakeline_runner.metrics import TimedExecutor, start_samplers
from wakeline_runner.publish import Publisher
from wakeline_runner.sandbox import Sandbox
from wakeline_runner.settings import RunnerSettings

log = logging.getLogger(__name__)


def result_producer(settings: RunnerSettings) -> AIOKafkaProducer:
    """The producer of results and dead letters (the tool round trip's floor uses it too).
    No linger: each result is sent and awaited on its own, so lingering only delays it."""
    return make_producer(settings, linger_ms=0)


async def run(settings: RunnerSettings, stop: asyncio.Event) -> None:
    isolation = await asyncio.to_thread(probe, settings)
    groups, limits = cgroups.detect(settings.cgroup_parent, settings.nproc, settings.memory_bytes)
    log.info("per-session limits: %s; rlimits per process %s; /tmp %d bytes; work dir %d bytes",
             limits, rlimits(settings), settings.tmp_bytes, settings.work_dir_bytes)
    sandbox = Sandbox(settings, isolation, groups)
    executor = TimedExecutor(Executor(settings, sandbox))
    consumer = make_consumer(settings, group_id=settings.group_id, session_timeout_ms=settings.session_timeout_ms,
                             rebalance_timeout_ms=settings.rebalance_timeout_ms,
                             heartbeat_interval_ms=settings.heartbeat_interval_ms)
    publisher = Publisher(partial(result_producer, settings), settings.partitions)
    await publisher.start()
    try:
        await consumer.start()
        try:
            loop = ToolCallLoop(settings, consumer, publisher, executor)
            samplers = start_samplers(loop, executor, consumer)
            try:
                await loop.run(stop)
            finally:
                for sampler in samplers:
                    sampler.cancel()
        finally:
            await consumer.stop()
    finally:
        await publisher.stop()
        sandbox.close()
        if groups is not None:
            groups.release_all()
