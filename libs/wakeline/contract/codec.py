"""The wire format: every Kafka value is one pydantic model as UTF-8 JSON.

Decoding failures raise `MalformedRecord` with a reason a person can act on; callers
send such records to the dead-letter topic and carry on.
"""

from __future__ import annotations

from typing import Callable, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from wakeline.runtime import metrics
from wakeline.contract.events import Frozen, RejectionCode

T = TypeVar("T")
# The bounded label of a dead letter's reason (metrics.DEAD_LETTERS); the brain prefixes its reasons with one.
_REJECTION_CODES = frozenset(get_args(RejectionCode))


class MalformedRecord(ValueError):
    """A record that cannot be decoded; `reason` says why in one line."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class DeadLetter(Frozen):
    topic: str
    partition: int
    offset: int
    key: str | None
    value: str
    reason: str
    service: str


def encode(model: BaseModel) -> bytes:
    return model.model_dump_json().encode("utf-8")


def decode(value: bytes | None, parser: Callable[[bytes], T]) -> T:
    if value is None:
        raise MalformedRecord("empty record value (tombstone)")
    try:
        return parser(value)
    except ValidationError as err:
        raise MalformedRecord(_describe(err)) from err


def _describe(err: ValidationError) -> str:
    problems = []
    for item in err.errors()[:5]:
        where = ".".join(str(part) for part in item["loc"]) or "record"
        problems.append(f"{where}: {item['msg']}")
    return "; ".join(problems)


def dead_letter_for(topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
                    reason: str, service: str) -> DeadLetter:
    metrics.DEAD_LETTERS.labels(service, metrics.reason_code(reason, _REJECTION_CODES)).inc()
    return DeadLetter(
        topic=topic, partition=partition, offset=offset,
        key=key.decode("utf-8", "replace") if key is not None else None,
        value=(value or b"").decode("utf-8", "replace")[:100_000], reason=reason, service=service,
    )
