"""KeyedScheduler: one session's calls in order, different sessions side by side, bounded."""

from __future__ import annotations

import asyncio

from wakeline_runner.keyed import KeyedScheduler


async def test_calls_with_the_same_key_run_in_submission_order() -> None:
    scheduler = KeyedScheduler(limit=4)
    ran: list[int] = []

    def work(n: int, pause: float):
        async def go():
            await asyncio.sleep(pause)
            ran.append(n)
        return go

    tasks = [scheduler.submit("s1", work(n, pause)) for n, pause in ((1, 0.05), (2, 0.0), (3, 0.01))]
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert ran == [1, 2, 3]


async def test_a_blocked_key_does_not_hold_up_another_key() -> None:
    scheduler = KeyedScheduler(limit=4)
    release = asyncio.Event()

    async def blocked():
        await release.wait()

    async def quick():
        return "done"

    slow = scheduler.submit("a", blocked)
    fast = scheduler.submit("b", quick)
    assert await asyncio.wait_for(fast, 5) == "done"
    assert not slow.done()
    release.set()
    await asyncio.wait_for(slow, 5)


async def test_no_more_than_limit_calls_run_at_once() -> None:
    scheduler = KeyedScheduler(limit=2)
    running = peak = 0

    async def work():
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1

    await asyncio.wait_for(asyncio.gather(*(scheduler.submit(f"k{n}", work) for n in range(6))), 5)
    assert peak == 2


async def test_a_failed_call_does_not_stop_the_next_call_of_its_key() -> None:
    scheduler = KeyedScheduler(limit=1)

    async def fails():
        raise RuntimeError("boom")

    async def works():
        return 42

    first = scheduler.submit("k", fails)
    second = scheduler.submit("k", works)
    assert await asyncio.wait_for(second, 5) == 42
    assert isinstance(first.exception(), RuntimeError)
    assert scheduler.tasks == set()


async def test_a_tenants_backlog_does_not_hold_up_another_tenants_next_call() -> None:
    scheduler = KeyedScheduler(limit=2)
    started: list[str] = []

    def call(name: str):
        async def run() -> None:
            started.append(name)
            await asyncio.sleep(0.001)
        return run

    flood = [scheduler.submit(f"flood-s{i}", call(f"flood-{i}"), tenant="flood") for i in range(50)]
    quiet = scheduler.submit("quiet-s1", call("quiet"), tenant="quiet")
    await asyncio.gather(*flood, quiet)
    # Two slots: the first two flood calls hold them; the flood's queue was first in turn, so the
    # quiet tenant's call waits for one more flood call at most. In arrival order it would start 51st.
    assert started.index("quiet") == 3, started[:5]
    assert [s for s in started if s != "quiet"] == [f"flood-{i}" for i in range(50)]
