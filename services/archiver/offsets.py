"""`next_offsets`: the Kafka positions a batch stores with it. Pure.

The rules for what the archive accepts and the sessions rows it moves are storage's
(`wakeline.storage.archive_rules`); this is the archiver's own half: where it has read to.
"""

from __future__ import annotations

from collections.abc import Iterable


def next_offsets(positions: Iterable[tuple[str, int, int]]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> one past the highest offset seen, from (topic, partition, offset)."""
    result: dict[tuple[str, int], int] = {}
    for topic, partition, offset in positions:
        result[topic, partition] = max(result.get((topic, partition), 0), offset + 1)
    return result
