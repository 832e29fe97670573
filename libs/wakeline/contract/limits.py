"""Record-size limits, stated once: what the log, the producers and the topics agree on.

`CommonSettings.max_record_bytes` is the largest value any Wakeline record may have. The
producers' `max_request_size` and the topics' `max.message.bytes` are derived from it
(with room for the record batch's framing), and the broker's `message.max.bytes` default
(1,048,588) is above both, so a record that passes `check_record` is never refused by
Kafka. Inputs are measured in encoded bytes, never characters: a text of `é` is two
bytes a character, and JSON escaping of control characters can make one byte six.
"""

from __future__ import annotations

from pydantic import BaseModel

# Everything an event adds around an input's own fields (ids, hashes, ts, actor, type,
# and the payload's field names): measured at ~700 bytes; kept generous.
ENVELOPE_BYTES = 4_096
# Record-batch framing and the key on top of a value: what the producer counts.
FRAMING_BYTES = 16_384


class RecordTooLarge(ValueError):
    """A record (or the event an input would become) is over `max_record_bytes`."""

    def __init__(self, what: str, size: int, limit: int):
        super().__init__(f"{what} is {size} bytes encoded; the limit is {limit} bytes (max_record_bytes)")
        self.size, self.limit = size, limit


def encoded_size(model: BaseModel) -> int:
    return len(model.model_dump_json().encode("utf-8"))


def input_budget(max_record_bytes: int) -> int:
    """The largest encoded input whose events still fit in one record."""
    return max_record_bytes - ENVELOPE_BYTES


def check_input(model: BaseModel, max_record_bytes: int, what: str = "the command") -> None:
    """Raises `RecordTooLarge` if the events this input becomes could exceed the limit."""
    size = encoded_size(model)
    if size > input_budget(max_record_bytes):
        raise RecordTooLarge(what, size + ENVELOPE_BYTES, max_record_bytes)


def check_record(value: bytes, max_record_bytes: int, what: str = "the record") -> None:
    if len(value) > max_record_bytes:
        raise RecordTooLarge(what, len(value), max_record_bytes)


def producer_max_request_size(max_record_bytes: int) -> int:
    return max_record_bytes + FRAMING_BYTES


def topic_max_message_bytes(max_record_bytes: int) -> int:
    return max_record_bytes + FRAMING_BYTES
