"""The brain's watch for dead peers (services/brain/dead_peers.py): lapsed leases are removed from
the group; a broken lease is taken again and never stops the watch; a failed removal is logged
and the watch goes on. The lease and the removal on the real database and broker:
tests/integration/test_group_leases.py."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from wakeline_brain.dead_peers import watch_peers
from wakeline_brain.metrics import DEAD_BRAINS_REMOVED


class FakeLease:
    group_id = "g"
    instance_id = "me"

    def __init__(self, answers: list[object]) -> None:
        self.answers = answers  # per check: a list of names, or an exception to raise
        self.held = True
        self.takes = 0
        self.closes = 0
        self.checks: list[float] = []

    async def take(self) -> None:
        self.takes += 1
        self.held = True

    async def lapsed(self, after_s: float) -> list[str]:
        self.checks.append(after_s)
        answer = self.answers.pop(0) if self.answers else []
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, list)
        return answer

    async def close(self) -> None:
        self.closes += 1
        self.held = False


async def run_for(lease: FakeLease, remove, checks: int) -> None:
    task = asyncio.create_task(watch_peers(lease, remove, check_s=0.001, lapse_s=2.0, retry_s=0.001))  # type: ignore[arg-type]
    while len(lease.checks) < checks:
        await asyncio.sleep(0.001)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


async def test_lapsed_members_are_removed_once_each_with_the_configured_wait() -> None:
    removed: list[list[str]] = []

    async def remove(names: Sequence[str]) -> dict[str, str]:
        removed.append(list(names))
        return {n: "NoError" for n in names}

    before = DEAD_BRAINS_REMOVED.labels(answer="NoError")._value.get()
    lease = FakeLease([[], ["a"], [], ["b", "c"], []])
    await run_for(lease, remove, 5)
    assert removed == [["a"], ["b", "c"]]
    assert DEAD_BRAINS_REMOVED.labels(answer="NoError")._value.get() - before == 3  # counted, for an alert
    assert set(lease.checks) == {2.0}
    assert lease.takes == 0 and lease.closes == 0


async def test_a_broken_lease_is_taken_again_and_the_watch_goes_on() -> None:
    removed: list[list[str]] = []

    async def remove(names: Sequence[str]) -> dict[str, str]:
        removed.append(list(names))
        return {}

    lease = FakeLease([[], ConnectionResetError("postgres restarted"), ["a"], []])
    await run_for(lease, remove, 4)
    assert lease.closes == 1 and lease.takes == 1
    assert removed == [["a"]]


async def test_a_failed_removal_is_not_fatal_and_the_lease_is_kept() -> None:
    calls: list[list[str]] = []

    async def remove(names: Sequence[str]) -> dict[str, str]:
        calls.append(list(names))
        raise OSError("broker away")

    lease = FakeLease([["a"], ["b"], []])
    await run_for(lease, remove, 3)
    assert calls == [["a"], ["b"]]
    assert lease.closes == 0  # only the broker failed: the lease is fine
