"""Whether a command may enter `wakeline.inbox`: the event it becomes must fit in one record.

Measured in encoded bytes (UTF-8 JSON, as the event is stored), never in characters, and
before anything is sent: a command over `max_record_bytes` is a 413 naming the limit, not
a record the brain cannot write. The request body is measured first, so an oversized
field is refused here rather than by a command model's own length bound.
"""

from __future__ import annotations

from pydantic import BaseModel

from wakeline.contract.limits import check_input

WHAT = "the event this request would become"


def admit(request_body: BaseModel | None, max_record_bytes: int) -> None:
    """Raises `RecordTooLarge` (413) when the body alone could not fit in one event."""
    if request_body is not None:
        check_input(request_body, max_record_bytes, WHAT)


def admit_command(command: BaseModel, max_record_bytes: int) -> None:
    """The same check on the built command, ids and actor included: what the brain will record."""
    check_input(command, max_record_bytes, WHAT)
