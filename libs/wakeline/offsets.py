"""`OffsetTracker`: which offset of a partition may be committed while records finish out of order.

A consumer that works on several records of one partition at once (one per session) may
only commit up to the lowest record still unfinished; committing past it would lose that
record if the process died. Pure bookkeeping, no I/O.
"""

from __future__ import annotations

import heapq


class OffsetTracker:
    def __init__(self) -> None:
        self._unfinished: set[int] = set()
        self._heap: list[int] = []
        self._next = None  # one past the highest offset seen

    def started(self, offset: int) -> None:
        self._unfinished.add(offset)
        heapq.heappush(self._heap, offset)
        self._next = max(self._next or 0, offset + 1)

    def finished(self, offset: int) -> None:
        self._unfinished.discard(offset)
        while self._heap and self._heap[0] not in self._unfinished:
            heapq.heappop(self._heap)

    def committable(self) -> int | None:
        """The offset to commit (the next record to read after a restart); None if nothing seen."""
        if self._heap:
            return self._heap[0]
        return self._next

    @property
    def in_flight(self) -> int:
        return len(self._unfinished)
