"""`BatchGate`: weather is retried; any other failing batch closes the gate, parks its batch and is kept."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from wakeline_archiver.gate import BatchGate


async def test_successful_batch_passes_and_the_gate_stays_open() -> None:
    gate, seen = BatchGate(), []

    async def handle(batch):
        seen.append(batch)

    await gate.pass_batch(handle, [1, 2])
    assert seen == [[1, 2]] and not gate.closed.is_set() and gate.failure is None


async def test_failing_batch_parks_its_pipeline_closes_the_gate_and_keeps_the_error() -> None:
    gate = BatchGate()

    async def handle(batch):
        raise RuntimeError("database went away")

    parked = asyncio.create_task(gate.pass_batch(handle, [1]))
    await asyncio.wait_for(gate.closed.wait(), 1)
    await asyncio.sleep(0.01)
    assert not parked.done()  # parked: it never returns, so its offsets are never committed
    assert str(gate.failure) == "database went away"
    parked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await parked


async def test_closed_gate_lets_the_batch_in_flight_finish_and_no_new_one_start() -> None:
    gate, release, started = BatchGate(), asyncio.Event(), []

    async def handle(batch):
        started.append(batch)
        await release.wait()

    in_flight = asyncio.create_task(gate.pass_batch(handle, "a"))
    await asyncio.sleep(0)
    gate.close()
    later = asyncio.create_task(gate.pass_batch(handle, "b"))
    drained = asyncio.create_task(gate.drained())
    await asyncio.sleep(0.01)
    assert not drained.done()
    release.set()
    await asyncio.wait_for(in_flight, 1)
    await asyncio.wait_for(drained, 1)
    assert started == ["a"] and not later.done()
    later.cancel()


async def test_weather_is_retried_with_the_same_batch_and_never_closes_the_gate() -> None:
    gate, seen = BatchGate(), []

    async def handle(batch):
        seen.append(batch)
        if len(seen) < 3:
            raise asyncpg.CannotConnectNowError("the database system is shutting down")

    await asyncio.wait_for(gate.pass_batch(handle, [7]), 5)
    assert seen == [[7]] * 3 and not gate.closed.is_set() and gate.failure is None
