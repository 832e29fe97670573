"""Where the gateway's commands go: `wakeline.inbox`, keyed and partitioned by session id.

The ids commands carry (and what an Idempotency-Key does to them) are in `idempotency.py`.
"""

from __future__ import annotations

from aiokafka import AIOKafkaProducer

from wakeline.contract.commands import CommandBase
from wakeline.transport.kafka_io import send_keyed
from wakeline.contract.topics import INBOX


class Inbox:
    """Sends one command and returns once Kafka has acknowledged it (acks=all)."""

    def __init__(self, producer: AIOKafkaProducer, partitions: int):
        self._producer = producer
        self._partitions = partitions

    async def submit(self, command: CommandBase) -> None:
        await send_keyed(self._producer, INBOX, command.session_id, command, self._partitions)
