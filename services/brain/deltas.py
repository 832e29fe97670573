"""Publishes `ModelDelta`s on the model-deltas topic: the live text of replies being written.

Not the log: a plain producer (no transaction, acks=1), records keyed and partitioned by
session like every wakeline topic, sent without waiting for the broker. A lost delta costs
a viewer some text until the `model_turn` event brings the whole reply; it never costs a
turn, so a failure to send is logged, not raised.
"""

from __future__ import annotations

import logging

from aiokafka import AIOKafkaProducer

from wakeline.contract.codec import encode
from wakeline.contract.deltas import ModelDelta
from wakeline.contract.topics import DELTAS, partition_for, record_key

log = logging.getLogger(__name__)


class DeltaPublisher:
    def __init__(self, producer: AIOKafkaProducer, partitions: int):
        self._producer, self._partitions = producer, partitions

    async def publish(self, delta: ModelDelta) -> None:
        sent = await self._producer.send(DELTAS, encode(delta), key=record_key(delta.session_id),
                                         partition=partition_for(delta.session_id, self._partitions))
        sent.add_done_callback(_log_failure)


def _log_failure(sent) -> None:  # type: ignore[no-untyped-def]
    if not sent.cancelled() and sent.exception() is not None:
        log.warning("a model delta was not sent: %r", sent.exception())
