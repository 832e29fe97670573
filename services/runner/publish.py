"""Publishing what the runner produces, so that no single call's record can stop it.

`publish_result` always ends with the call answered, or with a loud log line saying it
could not be: a transient Kafka error (broker restart, leader change, timeout) is
retried with backoff until it goes through or the runner stops (the call stays
uncommitted, so the next owner replays it); a result Kafka refuses for its size is
replaced by a small `too_large` error; any other refusal by a `crashed` error for that
call. `dead_letter` does the same for records that cannot be decoded. Neither raises,
except for cancellation.

A batch the broker refuses breaks the idempotent producer's sequence on that partition
(every later send there fails `OutOfOrderSequenceNumber`), so after any refusal the
producer is replaced, and sends that failed only because of it are sent again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Callable

from aiokafka import AIOKafkaProducer
from aiokafka.errors import (KafkaConnectionError, KafkaError, KafkaTimeoutError, MessageSizeTooLargeError,
                             OutOfOrderSequenceNumber, ProducerClosed, RecordTooLargeError, UnknownProducerId)
from pydantic import BaseModel

from wakeline.contract.codec import DeadLetter
from wakeline.contract.commands import ToolResultReport
from wakeline.transport.kafka_io import send_keyed
from wakeline.contract.topics import DEAD_LETTER, TOOL_RESULTS

log = logging.getLogger(__name__)
SIZE_ERRORS = (MessageSizeTooLargeError, RecordTooLargeError)
# Not this record's fault: the producer was broken by another record, or replaced under it.
PRODUCER_ERRORS = (OutOfOrderSequenceNumber, UnknownProducerId, ProducerClosed)
MAX_BACKOFF_S = 10.0


class Publisher:
    def __init__(self, make_producer: Callable[[], AIOKafkaProducer], partitions: int):
        self._make, self.partitions = make_producer, partitions
        self.producer: AIOKafkaProducer | None = None
        self._generation, self._renewing = 0, asyncio.Lock()
        self._retired: set[asyncio.Task] = set()

    async def start(self) -> None:
        self.producer = self._make()
        await self.producer.start()

    async def stop(self) -> None:
        await asyncio.gather(*self._retired, return_exceptions=True)
        if self.producer is not None:
            await self.producer.stop()

    async def publish_result(self, report: ToolResultReport) -> None:
        what = f"the result of call {report.tool_call_id} (session {report.session_id})"
        try:
            await self._send(TOOL_RESULTS, report.session_id, report, what)
            return
        except SIZE_ERRORS as err:
            log.error("%s was refused for its size (%r); publishing a too_large error instead", what, err)
            stand_in = _error_report(report, "too_large", f"the result was refused for its size: {err!r}")
        except Exception as err:  # noqa: BLE001 - one call's refusal must not stop the runner
            log.error("%s could not be published (%r); publishing a crashed error instead", what, err)
            stand_in = _error_report(report, "crashed", f"the result could not be published: {err!r}")
        try:
            await self._send(TOOL_RESULTS, report.session_id, stand_in, what + " (stand-in)")
        except Exception:  # noqa: BLE001 - the brain re-issues the call when it wakes the session
            log.exception("%s is lost: not even an error result could be published; moving on", what)

    async def dead_letter(self, letter: DeadLetter, what: str) -> None:
        try:
            await self._send(DEAD_LETTER, letter.key or "", letter, what)
        except Exception:  # noqa: BLE001 - an undecodable record is never worth stopping for
            log.exception("could not dead-letter %s (reason: %s); moving on", what, letter.reason)

    async def _send(self, topic: str, key: str, model: BaseModel, what: str) -> None:
        """Sends until acked; transient errors are retried with backoff, refusals raised."""
        backoff = 0.2
        while True:
            producer, generation = self.producer, self._generation
            try:
                await send_keyed(producer, topic, key, model, self.partitions)
                return
            except PRODUCER_ERRORS as err:
                log.warning("publishing %s failed with a broken producer (%r); sending it again", what, err)
                await self._renew(generation)
            except KafkaError as err:
                if not _transient(err):
                    await self._renew(generation)
                    raise
                log.warning("publishing %s to %s failed (%r); retrying in %.1f s", what, topic, err, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _renew(self, generation: int) -> None:
        """Replaces the producer, once per failure however many sends saw it."""
        async with self._renewing:
            if generation != self._generation:
                return
            fresh = self._make()
            try:
                await fresh.start()
            except Exception as err:  # noqa: BLE001 - the broker is away: keep the old one, retry later
                log.warning("could not start a replacement Kafka producer (%r); will try again", err)
                await _retire(fresh)
                return
            old, self.producer, self._generation = self.producer, fresh, generation + 1
            log.warning("replaced the Kafka producer after a refused send")
        retiring = asyncio.create_task(_retire(old))  # flushing may take a while; sends go on meanwhile
        self._retired.add(retiring)
        retiring.add_done_callback(self._retired.discard)


async def _retire(producer: AIOKafkaProducer) -> None:
    try:
        await producer.stop()
    except Exception as err:  # noqa: BLE001 - it is being thrown away; its sends were retried
        log.warning("the replaced producer did not stop cleanly: %r", err)


def _transient(err: KafkaError) -> bool:
    # KafkaTimeoutError is not marked retriable, but it is what a broker restart looks like.
    return bool(getattr(err, "retriable", False)) or isinstance(err, (KafkaTimeoutError, KafkaConnectionError))


def _error_report(report: ToolResultReport, kind: str, message: str) -> ToolResultReport:
    output = json.dumps({"error_kind": kind, "message": message[:2000]}, ensure_ascii=False)
    return report.model_copy(update={"output": output, "is_error": True, "error_kind": kind})
