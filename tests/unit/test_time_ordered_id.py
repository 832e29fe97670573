"""Event ids are UUIDv7: valid UUIDs whose order is their minting time's.

The storage point of them (tests cannot see page fill) is in docs/history/benchmarks.md; here, what
the rest of the system relies on: the `uuid` column takes them, they are unique, and an id
minted later sorts after one minted a millisecond earlier (as text, as `uuid`, as Postgres
compares them: by bytes).
"""

from __future__ import annotations

import time
import uuid

from hypothesis import given
from hypothesis import strategies as st

from wakeline.contract.ids import time_ordered_id

MS = st.integers(min_value=0, max_value=2**48 - 2)


@given(MS)
def test_an_id_is_a_version_7_uuid_carrying_its_millisecond(ms: int) -> None:
    value = uuid.UUID(time_ordered_id(ms))
    assert value.version == 7 and value.variant == uuid.RFC_4122
    assert value.int >> 80 == ms


@given(MS, st.integers(min_value=1, max_value=10**6))
def test_a_later_millisecond_sorts_after_as_text_uuid_and_bytes(ms: int, later: int) -> None:
    first, second = time_ordered_id(ms), time_ordered_id(min(ms + later, 2**48 - 1))
    assert first < second
    assert uuid.UUID(first) < uuid.UUID(second)
    assert uuid.UUID(first).bytes < uuid.UUID(second).bytes


def test_ids_of_one_millisecond_differ_and_the_clock_is_now() -> None:
    ids = {time_ordered_id(1_800_000_000_000) for _ in range(10_000)}
    assert len(ids) == 10_000
    before = time.time_ns() // 1_000_000
    minted = uuid.UUID(time_ordered_id()).int >> 80
    assert before <= minted <= time.time_ns() // 1_000_000
