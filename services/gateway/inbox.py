"""Where the gateway's commands go: `wakeline.inbox`, keyed and partitioned by session id.

Every command goes with the `wakeline-admitted` header (`wakeline.contract.quotas.ADMITTED_HEADER`):
the dispatcher has counted it against its tenant's rate quotas (or it counts against none),
so the brain, which counts whatever else arrives on the inbox, does not count it twice. The
header is worth what the inbox's write access is: a producer that may write the inbox may
already name any tenant, so marking a record admitted trusts it no further.
The ids commands carry (and what an Idempotency-Key does to them) are in `idempotency.py`.
"""

from __future__ import annotations

from aiokafka import AIOKafkaProducer

from wakeline.contract.commands import CommandBase
from wakeline.contract.quotas import ADMITTED_HEADER
from wakeline.transport.kafka_io import send_keyed
from wakeline.contract.topics import INBOX

ADMITTED = ((ADMITTED_HEADER, b"gateway"),)


class Inbox:
    """Sends one command and returns once Kafka has acknowledged it (acks=all)."""

    def __init__(self, producer: AIOKafkaProducer, partitions: int):
        self._producer = producer
        self._partitions = partitions

    async def submit(self, command: CommandBase) -> None:
        """Only after `QuotaGate.admit` (dispatch.py): the record says it was counted."""
        await send_keyed(self._producer, INBOX, command.session_id, command, self._partitions, ADMITTED)
