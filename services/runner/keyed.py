"""KeyedScheduler: different keys run concurrently (bounded), one key runs in order.

Calls of one session must not overtake each other (a later call may depend on an
earlier one's files); calls of different sessions must not wait for each other. When
every slot is busy, the next free one goes to the tenants in turn (`FairSlots`): one
tenant's backlog of calls does not hold up another tenant's next call (issue 34). A call
carrying its tenant's tool calls in flight quota waits while that many of the tenant's calls
run here, without holding up any other tenant's.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, TypeVar

from wakeline.runtime.fair_slots import FairSlots

T = TypeVar("T")


class KeyedScheduler:
    def __init__(self, limit: int):
        self._slots = FairSlots(limit)
        self._tails: dict[str, asyncio.Task] = {}
        self.tasks: set[asyncio.Task] = set()

    def submit(self, key: str, work: Callable[[], Awaitable[T]], tenant: str = "",
               cap: int | None = None) -> asyncio.Task:
        """Schedules `work` after every earlier submission with the same key, in `tenant`'s
        turn, and while fewer than `cap` of the tenant's run (None: no bound of its own)."""
        task = asyncio.create_task(self._run_after(self._tails.get(key), work, tenant, cap))
        self._tails[key] = task
        self.tasks.add(task)
        task.add_done_callback(lambda done: self._forget(key, done))
        return task

    async def _run_after(self, previous: asyncio.Task | None, work: Callable[[], Awaitable[T]], tenant: str,
                         cap: int | None) -> T:
        if previous is not None:
            await asyncio.wait([previous])  # wait for it, whether it succeeded or not
        async with self._slots.slot(tenant, cap):  # a slot only while running, not while queued behind a key
            return await work()

    def over_cap(self) -> dict[str, int]:
        """Calls waiting because their tenant runs its quota's worth here, by tenant."""
        return self._slots.over_cap()

    def _forget(self, key: str, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if self._tails.get(key) is task:
            del self._tails[key]

    async def cancel_all(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
