"""KeyedScheduler: different keys run concurrently (bounded), one key runs in order.

Calls of one session must not overtake each other (a later call may depend on an
earlier one's files); calls of different sessions must not wait for each other.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, TypeVar

T = TypeVar("T")


class KeyedScheduler:
    def __init__(self, limit: int):
        self._slots = asyncio.Semaphore(limit)
        self._tails: dict[str, asyncio.Task] = {}
        self.tasks: set[asyncio.Task] = set()

    def submit(self, key: str, work: Callable[[], Awaitable[T]]) -> asyncio.Task:
        """Schedules `work` after every earlier submission with the same key."""
        task = asyncio.create_task(self._run_after(self._tails.get(key), work))
        self._tails[key] = task
        self.tasks.add(task)
        task.add_done_callback(lambda done: self._forget(key, done))
        return task

    async def _run_after(self, previous: asyncio.Task | None, work: Callable[[], Awaitable[T]]) -> T:
        if previous is not None:
            await asyncio.wait([previous])  # wait for it, whether it succeeded or not
        async with self._slots:  # a slot only while running, not while queued behind a key
            return await work()

    def _forget(self, key: str, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if self._tails.get(key) is task:
            del self._tails[key]

    async def cancel_all(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
