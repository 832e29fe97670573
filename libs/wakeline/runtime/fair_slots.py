"""`FairSlots`: a bounded number of slots, handed out round robin across tenants.

An `asyncio.Semaphore` wakes its waiters in arrival order, so when one tenant queues a
thousand requests for a slot (model calls, tool calls), another tenant's next request
waits behind all of them. Here each tenant waits in a queue of its own, and a freed slot
goes to the next tenant in turn that has someone waiting: a tenant's next request waits
for at most one request of each other waiting tenant, however long their queues are.
Within one tenant the order stays the order of arrival (issue 34, fair scheduling).

A tenant may also have a bound of its own (`cap`, the runner's tool calls in flight quota):
while it holds that many slots its next request waits, and the free slots go to the other
tenants as if it were not waiting at all, so its waiting never holds anyone else up.
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
        self._held: dict[str, int] = {}  # slots each tenant holds
        self._caps: dict[str, int] = {}  # the bound of each tenant that has one, as last asked

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    def waiting_of(self, tenant: str) -> int:
        return len(self._waiting.get(tenant, ()))

    def over_cap(self) -> dict[str, int]:
        """The waiters of each tenant that holds its cap: they wait for their own tenant only."""
        return {tenant: len(queue) for tenant, queue in self._waiting.items() if not self._fits(tenant)}

    def held_by(self, tenant: str) -> int:
        return self._held.get(tenant, 0)

    @asynccontextmanager
    async def slot(self, tenant: str, cap: int | None = None) -> AsyncIterator[None]:
        """Holds one slot for the block, waiting for it in `tenant`'s turn; with `cap`, also
        until the tenant holds fewer than `cap` (the newest cap asked for a tenant binds)."""
        await self.acquire(tenant, cap)
        try:
            yield
        finally:
            self.release(tenant)

    async def acquire(self, tenant: str, cap: int | None = None) -> None:
        if cap is None:
            self._caps.pop(tenant, None)
        else:
            self._caps[tenant] = max(1, cap)
        if self.in_use < self.limit and self._fits(tenant) and self._next_tenant() is None:
            self._take(tenant)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, deque()).append(granted)
        self._hand_out()  # a raised cap may let it (or its tenant's earlier waiters) in now
        try:
            await granted  # `_hand_out` counts the slot as ours before it wakes us
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release(tenant)  # granted, then cancelled before it ran: pass the slot on
            else:
                self._forget(tenant, granted)
            raise

    def release(self, tenant: str) -> None:
        self.in_use -= 1
        held = self._held[tenant] - 1
        if held:
            self._held[tenant] = held
        else:
            del self._held[tenant]
        self._hand_out()

    def _hand_out(self) -> None:
        """Free slots to the waiting tenants in turn, passing over those at their cap."""
        while self.in_use < self.limit:
            tenant = self._next_tenant()
            if tenant is None:
                return
            queue = self._waiting[tenant]
            granted = queue.popleft()
            if queue:
                self._waiting.move_to_end(tenant)  # its next waiter goes after every other tenant's
            else:
                del self._waiting[tenant]
            if not granted.done():
                self._take(tenant)
                granted.set_result(None)

    def _next_tenant(self) -> str | None:
        """The first tenant in turn with a waiter it may run now (below its cap)."""
        return next((tenant for tenant in self._waiting if self._fits(tenant)), None)

    def _fits(self, tenant: str) -> bool:
        cap = self._caps.get(tenant)
        return cap is None or self._held.get(tenant, 0) < cap

    def _take(self, tenant: str) -> None:
        self.in_use += 1
        self._held[tenant] = self._held.get(tenant, 0) + 1

    def _forget(self, tenant: str, granted: asyncio.Future[None]) -> None:
        queue = self._waiting.get(tenant)
        if queue is not None and granted in queue:
            queue.remove(granted)
            if not queue:
                del self._waiting[tenant]
