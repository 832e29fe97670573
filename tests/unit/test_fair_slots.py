"""`FairSlots`: never more than the limit at once, each tenant in arrival order, and a freed
slot to the next waiting tenant in turn, so one tenant's queue never holds another's up; a
tenant's own cap (its tool calls in flight quota) holds only that tenant's requests."""

from __future__ import annotations

import asyncio

import pytest

from wakeline.runtime.fair_slots import FairSlots


async def run_in_order(slots: FairSlots, requests: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Starts every request (tenant, n) in the given order while one holder keeps the only slot,
    then frees it; the order the requests got their slots in."""
    order: list[tuple[str, int]] = []
    gate = asyncio.Event()

    async def holder() -> None:
        async with slots.slot("holder"):
            await gate.wait()

    async def request(tenant: str, n: int) -> None:
        async with slots.slot(tenant):
            order.append((tenant, n))
            await asyncio.sleep(0)

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(request(t, n)) for t, n in requests]
    await asyncio.sleep(0)
    assert slots.waiting == len(requests) and slots.in_use == 1
    gate.set()
    await asyncio.gather(first, *tasks)
    return order


async def test_a_flooding_tenants_queue_does_not_hold_up_another_tenants_next_request() -> None:
    flood = [("flood", n) for n in range(100)]
    order = await run_in_order(FairSlots(1), [*flood, ("quiet", 0), ("quiet", 1)])
    # With a FIFO semaphore the quiet tenant would come 101st and 102nd.
    assert order.index(("quiet", 0)) == 1 and order.index(("quiet", 1)) == 3
    assert [n for t, n in order if t == "flood"] == list(range(100))  # each tenant in arrival order


async def test_tenants_take_turns_one_request_each() -> None:
    requests = [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("c", 0), ("c", 1)]
    order = await run_in_order(FairSlots(1), requests)
    assert order == [("a", 0), ("b", 0), ("c", 0), ("a", 1), ("c", 1), ("a", 2)]


@pytest.mark.parametrize("limit", [1, 3])
async def test_never_more_than_the_limit_at_once(limit: int) -> None:
    slots, running, most = FairSlots(limit), 0, 0

    async def work(tenant: str) -> None:
        nonlocal running, most
        async with slots.slot(tenant):
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.001)
            running -= 1

    await asyncio.gather(*(work(f"t{i % 4}") for i in range(40)))
    assert most == limit and slots.in_use == 0 and slots.waiting == 0


async def test_a_waiter_cancelled_in_the_queue_or_just_after_its_grant_leaves_no_slot_behind() -> None:
    slots = FairSlots(1)
    await slots.acquire("holder")
    queued = asyncio.create_task(slots.acquire("a"))
    granted_then_cancelled = asyncio.create_task(slots.acquire("b"))
    last = asyncio.create_task(slots.acquire("c"))
    await asyncio.sleep(0)
    queued.cancel()
    await asyncio.gather(queued, return_exceptions=True)
    assert slots.waiting_of("a") == 0
    slots.release("holder")           # goes to b ...
    granted_then_cancelled.cancel()   # ... which is cancelled before it runs: the slot moves on to c
    await asyncio.gather(granted_then_cancelled, return_exceptions=True)
    await asyncio.wait_for(last, 1)
    assert slots.in_use == 1 and slots.waiting == 0 and slots.held_by("c") == 1
    slots.release("c")
    assert slots.in_use == 0 and slots.held_by("c") == 0



async def test_a_tenant_at_its_cap_waits_while_other_tenants_take_the_free_slots() -> None:
    slots, gate = FairSlots(4), asyncio.Event()
    running: dict[str, int] = {"capped": 0, "free": 0}
    most: dict[str, int] = {"capped": 0, "free": 0}

    async def work(tenant: str, cap: int | None) -> None:
        async with slots.slot(tenant, cap):
            running[tenant] += 1
            most[tenant] = max(most[tenant], running[tenant])
            await gate.wait()
            running[tenant] -= 1

    capped = [asyncio.create_task(work("capped", 1)) for _ in range(3)]  # first in line
    await asyncio.sleep(0)
    free = [asyncio.create_task(work("free", None)) for _ in range(3)]
    await asyncio.sleep(0)
    # the capped tenant's waiters do not stand in the free tenant's way: 1 + 3 slots in use
    assert running == {"capped": 1, "free": 3} and slots.over_cap() == {"capped": 2}
    gate.set()
    await asyncio.gather(*capped, *free)
    assert most == {"capped": 1, "free": 3} and slots.in_use == 0 and slots.waiting == 0
    assert slots.held_by("capped") == 0


async def test_capped_requests_run_one_after_another_in_arrival_order() -> None:
    slots, order, overlap = FairSlots(8), [], 0
    running = 0

    async def work(n: int) -> None:
        nonlocal running, overlap
        async with slots.slot("t", 1):
            running += 1
            overlap = max(overlap, running)
            order.append(n)
            await asyncio.sleep(0.001)
            running -= 1

    await asyncio.gather(*(work(n) for n in range(5)))
    assert overlap == 1 and order == list(range(5))


async def test_a_raised_cap_lets_the_tenants_waiters_in_at_once() -> None:
    slots, gate = FairSlots(8), asyncio.Event()
    started = 0

    async def work(cap: int) -> None:
        nonlocal started
        async with slots.slot("t", cap):
            started += 1
            await gate.wait()

    first = [asyncio.create_task(work(1)) for _ in range(3)]
    await asyncio.sleep(0)
    assert started == 1 and slots.over_cap() == {"t": 2}
    raised = asyncio.create_task(work(4))  # the newest cap binds: its waiters and this one run
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert started == 4 and slots.over_cap() == {}
    gate.set()
    await asyncio.gather(*first, raised)
