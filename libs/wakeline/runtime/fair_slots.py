"""`FairSlots`: a bounded number of slots, handed out round robin across tenants.

An `asyncio.Semaphore` wakes its waiters in arrival order, so when one tenant queues a
thousand requests for a slot (model calls, tool calls), another tenant's next request
waits behind all of them. Here each tenant waits in a queue of its own, and a freed slot
goes to the next tenant in turn that has someone waiting: a tenant's next request waits
for at most one request of each other waiting tenant, however long their queues are.
Within one tenant the order stays the order of arrival (issue 34, fair scheduling).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class FairSlots:
    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"at least one slot, not {limit}")
        self.limit = limit
        self.in_use = 0
        # Tenants with waiters, in the order they get the next free slot; each one's waiters FIFO.
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    def waiting_of(self, tenant: str) -> int:
        return len(self._waiting.get(tenant, ()))

    @asynccontextmanager
    async def slot(self, tenant: str) -> AsyncIterator[None]:
        """Holds one slot for the block, waiting for it in `tenant`'s turn."""
        await self.acquire(tenant)
        try:
            yield
        finally:
            self.release()

    async def acquire(self, tenant: str) -> None:
        if self.in_use < self.limit and not self._waiting:
            self.in_use += 1
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, deque()).append(granted)
        try:
            await granted  # `release` counts the slot as ours before it wakes us
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release()  # granted, then cancelled before it ran: pass the slot on
            else:
                self._forget(tenant, granted)
            raise

    def release(self) -> None:
        self.in_use -= 1
        while self._waiting and self.in_use < self.limit:
            tenant, queue = next(iter(self._waiting.items()))
            granted = queue.popleft()
            if queue:
                self._waiting.move_to_end(tenant)  # its next waiter goes after every other tenant's
            else:
                del self._waiting[tenant]
            if not granted.done():
                self.in_use += 1
                granted.set_result(None)

    def _forget(self, tenant: str, granted: asyncio.Future[None]) -> None:
        queue = self._waiting.get(tenant)
        if queue is not None and granted in queue:
            queue.remove(granted)
            if not queue:
                del self._waiting[tenant]
