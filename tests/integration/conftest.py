"""Fixtures only: the broker and the runner harness several runner test modules share.

What they are built from lives in runner_harness.py; test modules import helpers from
there (or from the other *_harness modules) by name, never from another test module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runner_harness import Harness, reachable_kafka
from wakeline.runtime.settings import CommonSettings


@pytest.fixture(scope="module")
async def kafka() -> CommonSettings:
    return await reachable_kafka()


@pytest.fixture
async def harness(kafka: CommonSettings, tmp_path: Path) -> AsyncIterator[Harness]:
    harness = Harness(kafka, tmp_path)
    await harness.start()
    yield harness
    await harness.close()
