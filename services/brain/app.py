"""The brain's composition root: builds its clients (pool, consumers, producers) and runs
the consume loop. Nothing below it builds a Kafka or Postgres client of its own."""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from aiokafka import AIOKafkaProducer
from aiokafka.producer import sender as aiokafka_sender

from wakeline.transport.group_removal import remove_static_members
from wakeline.transport.kafka_io import kafka_auth, make_client, make_consumer
from wakeline.contract.limits import producer_max_request_size
from wakeline.storage.group_leases import GroupLease
from wakeline.storage.pg import TenantPool
from wakeline.storage.postgres_store import PostgresEventStore
from wakeline.storage.turn_slots import PostgresTurnSlots
from wakeline.storage.quota_counts import QuotaCounts
from wakeline.contract.tools import tool_schemas
from wakeline_brain.assignor import StickyCoPartitionedAssignor
from wakeline_brain.dead_peers import watch_peers
from wakeline_brain.metrics import CountedRefusals, TimedProducer, start_samplers
from wakeline_brain.deltas import DeltaPublisher
from wakeline_brain.models import ModelRegistry
from wakeline_brain.partitions import INPUT_TOPICS
from wakeline_brain.router import Brain
from wakeline_brain.settings import BrainSettings
from wakeline_brain.open_transactions import OpenTransactions
from wakeline_brain.tail_reads import TailReader, tail_consumer
from wakeline_brain.tenant_quotas import TenantQuotas, postgres_counter
from wakeline_brain.wake import SessionLoader

log = logging.getLogger(__name__)


def partition_producer(settings: BrainSettings, partition: int) -> TimedProducer:
    """The producer of one partition's `PartitionWriter`; its id is fixed per partition, so
    starting it fences the partition's previous writer (see writer.py)."""
    # A transaction begun right after the previous commit often finds that commit's
    # markers still being written; the coordinator refuses its AddPartitionsToTxn with
    # CONCURRENT_TRANSACTIONS, and aiokafka retries that one after a fixed 20 ms (its
    # module constant BACKOFF_OVERRIDE), not after retry_backoff_ms. Under load every
    # transaction follows another, so that wait lands on the tool round trip's tail
    # (settings.py: txn_concurrent_retry_ms).
    aiokafka_sender.BACKOFF_OVERRIDE = settings.txn_concurrent_retry_ms / 1000
    return TimedProducer(AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), acks="all", enable_idempotence=True,
        transactional_id=f"{settings.group_id}-p{partition}", transaction_timeout_ms=60_000, linger_ms=1,
        retry_backoff_ms=settings.txn_retry_backoff_ms,
        max_request_size=producer_max_request_size(settings.max_record_bytes)))


def deltas_producer(settings: BrainSettings) -> AIOKafkaProducer:
    """The model-deltas producer: live text for viewers, not the log, so no transaction and
    one acknowledgement; a small linger batches a fast stream's pieces."""
    return AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, **kafka_auth(settings), acks=1,
                            enable_idempotence=False, linger_ms=5,
                            max_request_size=producer_max_request_size(settings.max_record_bytes))


async def run(settings: BrainSettings, stop: asyncio.Event) -> None:
    models = ModelRegistry(settings)
    async with TenantPool(settings.postgres_dsn, "wakeline-brain", min_size=1,
                          max_size=settings.pool_max_size) as pool:
        # The lease before the group's join: a brain in the group always has one (dead_peers.py).
        lease, removals = None, None
        if settings.group_instance_id is not None and settings.peer_lapse_s is not None:
            lease = GroupLease(settings.postgres_dsn, settings.group_id, settings.group_instance_id)
            await lease.take()
            removals = make_client(settings, client_id=f"{settings.group_instance_id}-removals")
            await removals.bootstrap()
        tail = tail_consumer(settings)
        await tail.start()
        deltas = deltas_producer(settings)
        await deltas.start()
        open_txns = OpenTransactions(settings)
        await open_txns.start()
        # A tail this brain wrote all of, none of it the session's, is not read (own_writes.py).
        loader = SessionLoader(PostgresEventStore(pool), TailReader(tail), settings.archiver_group,
                               own=lambda partition: (w.own if (w := brain.writers.get(partition)) else None))
        slots = PostgresTurnSlots(pool, settings.quota_running_sessions, total=settings.running_sessions_total)
        brain = Brain(settings, loader.load, models.model_for, tool_schemas(),
                      new_producer=partial(partition_producer, settings), open_before=open_txns,
                      load_prefix=loader.prefix,
                      publish_delta=DeltaPublisher(deltas, settings.partitions).publish, turn_slots=slots,
                      admit=CountedRefusals(QuotaCounts(pool, settings.quota_defaults())).admit,
                      tenant_quotas=TenantQuotas(postgres_counter(pool, settings.quota_tokens_per_day,
                                                                  settings.quota_tool_calls_in_flight),
                                                 settings.quota_tokens_per_day,
                                                 settings.quota_tool_calls_in_flight, settings.quota_fresh_s))
        # The assignor gives a brain the same partition numbers of every input topic, so
        # the owner of inbox p also owns tool-results p and writes events p, and keeps a
        # brain's partitions when another joins or dies. Only one assignor: aiokafka 0.14
        # sends a JoinGroup per configured assignor (inside its loop over them), and the
        # second join restarts the rebalance the first began — forever, seen in make chaos.
        # So a group still running range-assigned brains must be stopped, not rolled.
        # A short session timeout is how fast a dead brain's partitions move on
        # (BrainSettings.session_timeout_ms).
        consumer = make_consumer(settings, group_id=settings.group_id,
                                 partition_assignment_strategy=(StickyCoPartitionedAssignor,),
                                 session_timeout_ms=settings.session_timeout_ms,
                                 rebalance_timeout_ms=settings.rebalance_timeout_ms or settings.session_timeout_ms,
                                 group_instance_id=settings.group_instance_id,
                                 heartbeat_interval_ms=settings.heartbeat_interval_ms)
        brain.attach(consumer)
        consumer.subscribe(list(INPUT_TOPICS), listener=brain.partitions)
        await consumer.start()
        samplers = [*start_samplers(brain, consumer),
                    asyncio.create_task(brain.sweep_slots(slots, settings.turn_slot_sweep_s), name="slot-sweep")]
        if lease is not None and removals is not None:
            samplers.append(asyncio.create_task(
                watch_peers(lease, partial(remove_static_members, removals, settings.group_id),
                            check_s=settings.peer_check_s, lapse_s=settings.peer_lapse_s), name="dead-peers"))
        log.info("brain %s started", settings.host)
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=200, max_records=500)
                for records in batch.values():
                    for record in records:
                        brain.dispatch(record)
        finally:
            # The consumer first: it leaves the group, so the partitions move at once,
            # and no assignment can hand us a writer after the brain has closed.
            for sampler in samplers:
                sampler.cancel()
            await consumer.stop()
            if lease is not None:  # the others remove this brain from the group once it lapses
                await lease.close()
            if removals is not None:
                await removals.close()
            await brain.close()
            await open_txns.stop()
            await tail.stop()
            await deltas.stop()
            await models.close()
