"""Where the gateway's commands go: `wakeline.inbox`, keyed and partitioned by session id.

Also the ids commands carry. A caller's `Idempotency-Key` fixes the command id, so a
retried request is the same command: the brain records each command id once, and the
gateway finds the same outcome event the first attempt caused.
"""

from __future__ import annotations

import uuid

from aiokafka import AIOKafkaProducer

from wakeline.commands import CommandBase
from wakeline.kafka_io import send_keyed
from wakeline.topics import INBOX

# Fixed forever: changing it would make a retry after an upgrade a different command.
IDEMPOTENCY_NAMESPACE = uuid.UUID("6f1d3c2e-8b7a-5e4f-9a0b-1c2d3e4f5a6b")


def command_id_for(tenant: str, session_id: str, idempotency_key: str | None) -> str:
    """A fresh id, or the one a (tenant, session, key) always maps to."""
    if idempotency_key is None:
        return str(uuid.uuid4())
    return str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"command\n{tenant}\n{session_id}\n{idempotency_key}"))


def session_id_for(tenant: str, actor: str, idempotency_key: str | None) -> str:
    """The id of a new session; a retried create with the same key names the same session.

    The actor is part of it: two users who happen to pick the same key get two sessions.
    """
    if idempotency_key is None:
        return str(uuid.uuid4())
    return str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"session\n{tenant}\n{actor}\n{idempotency_key}"))


class Inbox:
    """Sends one command and returns once Kafka has acknowledged it (acks=all)."""

    def __init__(self, producer: AIOKafkaProducer, partitions: int):
        self._producer = producer
        self._partitions = partitions

    async def submit(self, command: CommandBase) -> None:
        await send_keyed(self._producer, INBOX, command.session_id, command, self._partitions)
