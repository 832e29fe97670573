"""The archiver's stream, a faust app: one agent per projected topic, each taking batches
through the gate.

A handler has two halves: `prepare` (pure CPU: decoding, rows) and `store` (the
Postgres transaction). While batch N is being stored, the agent already takes and
prepares batch N+1, so Python decodes while Postgres writes; batch N+1 is stored only
after N's transaction committed, so batches still commit one at a time and in order.
An agent acknowledges a batch's records only after its store returned, i.e. after the
transaction holding them committed, so faust's own Kafka commits never run ahead of the
archive. No faust tables, no RocksDB, no web server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import faust
from aiokafka.helpers import create_ssl_context

from wakeline.topics import DEAD_LETTER, EVENTS
from wakeline_archiver.gate import BatchGate
from wakeline_archiver.records import RawRecord
from wakeline_archiver.settings import ArchiverSettings
from wakeline_archiver.transport import ArchiverTransport, StoredPositions

T = TypeVar("T")


@dataclass(frozen=True)
class Handler(Generic[T]):
    prepare: Callable[[Sequence[RawRecord]], T]  # pure: may run while the previous batch is stored
    store: Callable[[T], Awaitable[None]]


@dataclass(frozen=True)
class ArchivedTopics:
    """The topics projected; tests pass private ones so their records reach no other archiver."""

    events: str = EVENTS
    dead_letter: str = DEAD_LETTER


def build_app(settings: ArchiverSettings, *, topics: ArchivedTopics, events: Handler, dead_letters: Handler,
              gate: BatchGate, stored_positions: StoredPositions) -> faust.App:
    app = faust.App(
        settings.archiver_group,  # also the Kafka consumer group
        broker=f"kafka://{settings.kafka_bootstrap}",
        broker_credentials=_credentials(settings),
        datadir=str(settings.archiver_data_dir), store="memory://", web_enabled=False,
        autodiscover=False, topic_disable_leader=True, topic_allow_declare=False,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=settings.archiver_session_timeout_s,
        broker_heartbeat_interval=min(3.0, settings.archiver_session_timeout_s / 5),
        # Rebalances and shutdown do not wait for buffered records: the gate lets the
        # batch in flight finish, and whatever was buffered is read again from the
        # archive's offsets, where a redelivery is a no-op.
        stream_wait_empty=False,
    )
    app.transport = ArchiverTransport(app.conf.broker_consumer, app, stored_positions=stored_positions)
    for topic, handler, name in ((topics.events, events, "archive-events"),
                                 (topics.dead_letter, dead_letters, "archive-dead-letters")):
        channel = app.topic(topic, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
        app.agent(channel, name=name)(_batches(handler, settings, gate))
    return app


def _credentials(settings: ArchiverSettings) -> faust.SASLCredentials | None:
    """faust's form of `kafka_io.kafka_auth`: the archiver's principal, or none on PLAINTEXT."""
    if settings.kafka_security_protocol == "PLAINTEXT":
        return None
    principal, password = settings.kafka_login()
    tls = create_ssl_context() if settings.kafka_security_protocol == "SASL_SSL" else None
    return faust.SASLCredentials(username=principal, password=password, ssl_context=tls,
                                 mechanism=settings.kafka_sasl_mechanism)


def _batches(handler: Handler[Any], settings: ArchiverSettings,
             gate: BatchGate) -> Callable[[Any], Awaitable[None]]:
    async def store_then_ack(stream: Any, prepared: Any, events: list[Any]) -> None:
        await gate.pass_batch(handler.store, prepared)
        for event in events:
            await stream.ack(event)

    async def agent(stream: Any) -> None:
        in_flight: asyncio.Future[None] | None = None
        try:
            async for events in stream.noack_take(settings.archiver_batch_size,
                                                  within=settings.archiver_batch_window_s):
                prepared = handler.prepare([event.message for event in events])
                if in_flight is not None:
                    await in_flight  # one transaction at a time, in offset order
                in_flight = asyncio.ensure_future(store_then_ack(stream, prepared, events))
            if in_flight is not None:
                await in_flight
        finally:
            # Cancelled by the app's stop: a batch still parked in the gate goes with the agent.
            if in_flight is not None and not in_flight.done():
                in_flight.cancel()
    return agent
