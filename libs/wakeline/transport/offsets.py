"""OffsetTracker: which offset is safe to commit when records finish out of order.

Records of one partition finish in any order (sessions run concurrently), but a Kafka
commit means "everything before this offset is done". So the committable offset of a
partition is its lowest unfinished offset, or one past the highest seen when all are
done. Pure: no Kafka, no clock; partitions are any hashable key (a TopicPartition).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Hashable, Iterable


@dataclass
class _Partition:
    unfinished: set[int] = field(default_factory=set)
    heap: list[int] = field(default_factory=list)  # unfinished offsets; finished ones leave lazily
    next_offset: int | None = None  # one past the highest offset added

    def lowest_unfinished(self) -> int | None:
        while self.heap and self.heap[0] not in self.unfinished:
            heapq.heappop(self.heap)
        return self.heap[0] if self.heap else None


class OffsetTracker:
    def __init__(self) -> None:
        self._partitions: dict[Hashable, _Partition] = {}
        self._committed: dict[Hashable, int] = {}

    def add(self, partition: Hashable, offset: int) -> None:
        """A fetched record that is now in flight."""
        state = self._partitions.setdefault(partition, _Partition())
        state.unfinished.add(offset)
        heapq.heappush(state.heap, offset)
        state.next_offset = max(state.next_offset or 0, offset + 1)

    def finish(self, partition: Hashable, offset: int) -> None:
        """The record's effect is durable; unknown partitions (revoked) are ignored."""
        state = self._partitions.get(partition)
        if state is not None:
            state.unfinished.discard(offset)

    def committable(self, partition: Hashable) -> int | None:
        state = self._partitions.get(partition)
        if state is None or state.next_offset is None:
            return None
        lowest = state.lowest_unfinished()
        return state.next_offset if lowest is None else lowest

    def to_commit(self, partitions: Iterable[Hashable] | None = None) -> dict[Hashable, int]:
        """Committable offsets that moved past what `mark_committed` last recorded."""
        chosen = self._partitions if partitions is None else [p for p in partitions if p in self._partitions]
        moves = {}
        for partition in chosen:
            offset = self.committable(partition)
            if offset is not None and offset > self._committed.get(partition, -1):
                moves[partition] = offset
        return moves

    def mark_committed(self, offsets: dict[Hashable, int]) -> None:
        self._committed.update(offsets)

    def next_offset(self, partition: Hashable) -> int | None:
        """One past the highest offset added: where a consumer that keeps the partition resumes."""
        state = self._partitions.get(partition)
        return state.next_offset if state is not None else None

    def in_flight(self) -> int:
        return sum(len(state.unfinished) for state in self._partitions.values())

    def drop(self, partitions: Iterable[Hashable]) -> None:
        """Forget revoked partitions: their late finishes must not move a new owner's offsets."""
        for partition in partitions:
            self._partitions.pop(partition, None)
            self._committed.pop(partition, None)
